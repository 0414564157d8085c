//! The tensor-core path of the fused GPU engine, host side: whether a device
//! runs it for a model (cooperative matrices of the operand type, planes of
//! 32 units, a tile in shared memory), and its launches — the f32 master
//! weights cast to the operand type, then
//! [`tensor_grad`](crate::engine::fused::gpu::kernels::tensor::tensor_grad)
//! or, where the plan says so,
//! [`strips_grad`](crate::engine::fused::gpu::kernels::strips::strips_grad).
//! The partial rows it leaves are reduced like every other gradient pass's.

use crate::config::{Precision, TrainConfig};
use crate::engine::fused::gpu::compiler::{compiler, nvrtc, spirv};
use crate::engine::fused::gpu::kernels::args::BatchLaunch;
use crate::engine::fused::gpu::kernels::fused::CUBE_UNITS;
use crate::engine::fused::gpu::kernels::mma::PLANE_UNITS;
use crate::engine::fused::gpu::kernels::strips::strips_grad;
use crate::engine::fused::gpu::kernels::tensor::{cast_params, tensor_grad};
use crate::engine::fused::gpu::knobs::vulkan_tensor_cores;
use crate::engine::fused::gpu::shape::Shape;
use crate::engine::fused::gpu::tensor_plan::{plan, resident_cubes, takes, Plan};
use crate::engine::fused::gpu::GpuFused;
use crate::error::{FerroError, Result};
use cubecl::ir::{ElemType, FloatKind};
use cubecl::prelude::*;
use cubecl::server::Handle;

/// Multiprocessors assumed where the runtime does not say.
const DEFAULT_SMS: usize = 64;

/// The operand type of `p` on the tensor cores (None for f32).
fn operand(p: Precision) -> Option<FloatKind> {
    match p {
        Precision::F32 => None,
        Precision::F16 => Some(FloatKind::F16),
        Precision::Bf16 => Some(FloatKind::BF16),
    }
}

/// The layout of the tensor-core pass for `cfg` on this device (its tile,
/// where its weights are read from, its units), or why the device does not
/// run it.
pub fn tensor_plan<R: Runtime>(client: &ComputeClient<R>, cfg: &TrainConfig) -> Result<Plan> {
    let fail = |reason: String| FerroError::OutsideEnvelope { reason };
    let p = cfg.precision.name();
    let kind = operand(cfg.precision).ok_or_else(|| fail("f32 runs the f32 kernels".into()))?;
    let cooperative = spirv(client) && vulkan_tensor_cores();
    if !nvrtc(client) && !cooperative {
        // CubeCL's WGSL compiler has no cooperative matrices; its SPIR-V
        // compiler has them (the pass then works round what that compiler
        // does differently: `Pass::spirv`), unless switched off (`knobs`).
        return Err(fail(format!(
            "--precision {p} runs on tensor cores through CUDA or SPIR-V \
             (Vulkan) only{}",
            if spirv(client) {
                "; FERROFIT_VULKAN_TENSOR_CORES=0 is set"
            } else {
                ""
            }
        )));
    }
    let shape = Shape::of(cfg);
    if !takes(&shape) {
        return Err(fail(format!(
            "--precision {p} in the fused engine takes 2 or more hidden layers of a \
             multiple of 16 units and relu, tanh or sigmoid-like activations; use --precision f32"
        )));
    }
    let float = |k: FloatKind| ElemType::Float(k).into();
    let mma = cubecl::ir::features::MmaConfig {
        a_type: float(kind),
        b_type: float(kind),
        cd_type: float(FloatKind::F32),
        m: 16,
        k: 16,
        n: 16,
    };
    if !client.features().matmul.cmma.contains(&mma) {
        return Err(fail(format!(
            "--precision {p} in the fused engine needs tensor cores (cooperative \
             matrices of {p}); this device has none through {}: use --precision f32",
            compiler(client)
        )));
    }
    let hw = &client.properties().hardware;
    if hw.plane_size_min != PLANE_UNITS || hw.plane_size_max != PLANE_UNITS {
        return Err(fail(format!(
            "the tensor-core kernel needs planes of {PLANE_UNITS} units; this device has {}–{}",
            hw.plane_size_min, hw.plane_size_max
        )));
    }
    // The products on registers need manual m16n8k16 MMA and ldmatrix.
    let manual = cubecl::ir::features::MmaConfig { n: 8, ..mma };
    let features = &client.features().matmul;
    let manual = features.mma.contains(&manual) && features.ldmatrix.contains(&float(kind));
    plan(&shape, hw.max_shared_memory_size, manual).ok_or_else(|| {
        fail(
            "the model's activations do not fit this device's shared memory; use --precision f32"
                .into(),
        )
    })
}

impl<R: Runtime> GpuFused<R> {
    /// The tensor-core gradient pass over `len` points from `start` (or `idx`).
    pub(crate) fn launch_tensor(
        &mut self,
        start: usize,
        len: usize,
        idx: Option<Handle>,
        scale: f32,
    ) {
        match self.cfg.precision {
            Precision::F16 => self.launch_tensor_as::<half::f16>(start, len, idx, scale),
            _ => self.launch_tensor_as::<half::bf16>(start, len, idx, scale),
        }
    }

    fn launch_tensor_as<E: Float + CubeElement>(
        &mut self,
        start: usize,
        len: usize,
        idx: Option<Handle>,
        scale: f32,
    ) {
        let np = self.np;
        // As many cubes as the device holds at once (each takes many tiles):
        // fewer partial rows to sum, no tail of a last partial wave.
        let hw = &self.client.properties().hardware;
        let sms = hw
            .num_streaming_multiprocessors
            .map_or(DEFAULT_SMS, |n| n as usize);
        let Some(layout) = self.pass.tensor else {
            unreachable!("the tensor-core launch runs only with a tensor-core plan")
        };
        let per_sm =
            resident_cubes(&Shape::of(&self.cfg), &layout, hw.max_shared_memory_size).max(1);
        let cubes = (sms * per_sm)
            .min(len.div_ceil(layout.tile))
            .clamp(1, self.max_cubes);
        let use_idx = idx.is_some();
        // SAFETY (unchecked launches: no bounds checks): params holds np f32
        // values and `half` np operand values; partials a row of np + 1 for
        // each of at most max_cubes cubes; the kernel indexes only inside
        // these, the tile's shared memory and the batch's points.
        unsafe {
            // Weights read from shared memory are cast as each cube copies
            // them there; streamed ones are read from this copy.
            if layout.streamed {
                cast_params::launch_unchecked::<f32, E, R>(
                    &self.client,
                    CubeCount::Static(np.div_ceil(CUBE_UNITS as usize) as u32, 1, 1),
                    CubeDim::new_1d(CUBE_UNITS),
                    ArrayArg::from_raw_parts(self.buf.params.clone(), np),
                    ArrayArg::from_raw_parts(self.buf.half.clone(), np),
                    self.pass.spirv,
                );
            }
            // The two passes take the same arguments.
            let launch = if layout.strips {
                strips_grad::launch_unchecked::<f32, E, R>
            } else {
                tensor_grad::launch_unchecked::<f32, E, R>
            };
            launch(
                &self.client,
                CubeCount::Static(cubes as u32, 1, 1),
                CubeDim::new_1d(layout.units as u32),
                self.points_arg(idx, len),
                ArrayArg::from_raw_parts(self.buf.params.clone(), np),
                ArrayArg::from_raw_parts(self.buf.half.clone(), np),
                ArrayArg::from_raw_parts(self.buf.partials.clone(), self.max_cubes * (np + 1)),
                BatchLaunch::new(start as u32, len as u32, scale),
                Shape::of(&self.cfg),
                self.pass_for(use_idx),
            );
        }
        self.pending = Some(cubes as u32);
    }
}
