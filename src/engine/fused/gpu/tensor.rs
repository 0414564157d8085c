//! The tensor-core path of the fused GPU engine, host side: whether a device
//! runs it for a model (cooperative matrices of the operand type, planes of
//! 32 units, a tile in shared memory), and its launches — the f32 master
//! weights cast to the operand type, then
//! [`tensor_grad`](crate::engine::fused::gpu::kernels::tensor::tensor_grad).
//! The partial rows it leaves are reduced like every other gradient pass's.

use crate::config::{Precision, TrainConfig};
use crate::engine::fused::gpu::kernels::args::BatchLaunch;
use crate::engine::fused::gpu::kernels::fused::CUBE_UNITS;
use crate::engine::fused::gpu::kernels::mma::PLANE_UNITS;
use crate::engine::fused::gpu::kernels::ops::cubes_by_shared;
use crate::engine::fused::gpu::kernels::tensor::{
    cast_params, takes, tensor_grad, tile_bytes, tile_points,
};
use crate::engine::fused::gpu::shape::Shape;
use crate::engine::fused::gpu::GpuFused;
use crate::error::{FerroError, Result};
use cubecl::ir::{ElemType, FloatKind};
use cubecl::prelude::*;
use cubecl::server::Handle;

/// Multiprocessors assumed where the runtime does not say.
const DEFAULT_SMS: usize = 64;

/// 32-bit registers of one multiprocessor (every NVIDIA GPU since Kepler).
const REGISTERS_PER_SM: usize = 65_536;

/// Registers a unit of `tensor_grad` takes, as Nsight Compute read them on the
/// H200 (sm_90): 78–80 for widths up to 64, 128 above (the runtime does not say;
/// docs/results/2026-12-01-h200/profile/). Counting more cubes than the
/// registers hold launched a partial second wave: 4 a multiprocessor by shared
/// memory where 3 fit, so a third of the cubes ran after the rest.
fn registers_per_unit(hidden: usize) -> usize {
    if hidden <= 64 {
        80
    } else {
        128
    }
}

/// Cubes of the tensor-core pass one multiprocessor holds at once, by shared
/// memory (`per_sm_shared` bytes; 1 KiB of it the driver keeps per cube) and
/// by registers.
pub fn resident_cubes(s: &Shape, tile: usize, per_sm_shared: usize) -> usize {
    let by_shared = cubes_by_shared(tile_bytes(s, tile), per_sm_shared);
    let by_registers = REGISTERS_PER_SM / (registers_per_unit(s.hidden) * CUBE_UNITS as usize);
    by_shared.min(by_registers).max(1)
}

/// The operand type of `p` on the tensor cores (None for f32).
fn operand(p: Precision) -> Option<FloatKind> {
    match p {
        Precision::F32 => None,
        Precision::F16 => Some(FloatKind::F16),
        Precision::Bf16 => Some(FloatKind::BF16),
    }
}

/// Points a tile of the tensor-core pass holds for `cfg` on this device, or
/// why the device does not run it.
pub fn tensor_tile<R: Runtime>(client: &ComputeClient<R>, cfg: &TrainConfig) -> Result<usize> {
    let fail = |reason: String| FerroError::OutsideEnvelope { reason };
    let p = cfg.precision.name();
    let kind = operand(cfg.precision).ok_or_else(|| fail("f32 runs the f32 kernels".into()))?;
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
             matrices of {p}); this device or shader compiler has none: use --precision f32"
        )));
    }
    let hw = &client.properties().hardware;
    if hw.plane_size_min != PLANE_UNITS || hw.plane_size_max != PLANE_UNITS {
        return Err(fail(format!(
            "the tensor-core kernel needs planes of {PLANE_UNITS} units; this device has {}–{}",
            hw.plane_size_min, hw.plane_size_max
        )));
    }
    tile_points(&shape, hw.max_shared_memory_size).ok_or_else(|| {
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
        let per_sm = resident_cubes(
            &Shape::of(&self.cfg),
            self.pass.tile,
            hw.max_shared_memory_size,
        );
        let cubes = (sms * per_sm)
            .min(len.div_ceil(self.pass.tile))
            .clamp(1, self.max_cubes);
        let use_idx = idx.is_some();
        // SAFETY (unchecked launches: no bounds checks): params holds np f32
        // values and `half` np operand values; partials a row of np + 1 for
        // each of at most max_cubes cubes; the kernel indexes only inside
        // these, the tile's shared memory and the batch's points.
        unsafe {
            cast_params::launch_unchecked::<f32, E, R>(
                &self.client,
                CubeCount::Static(np.div_ceil(CUBE_UNITS as usize) as u32, 1, 1),
                CubeDim::new_1d(CUBE_UNITS),
                ArrayArg::from_raw_parts(self.buf.params.clone(), np),
                ArrayArg::from_raw_parts(self.buf.half.clone(), np),
            );
            tensor_grad::launch_unchecked::<f32, E, R>(
                &self.client,
                CubeCount::Static(cubes as u32, 1, 1),
                CubeDim::new_1d(CUBE_UNITS),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Activation, Loss, OptimizerKind};
    use crate::engine::fused::gpu::kernels::mma::group;

    fn shape(hidden: usize, layers: usize, act: Activation) -> Shape {
        Shape {
            inputs: 1,
            hidden,
            layers,
            outputs: 1,
            act,
            loss: Loss::Mse,
            opt: OptimizerKind::Sgd,
        }
    }

    /// The H200's shared memory per cube (opt-in maximum), in bytes.
    const H200: usize = 227 * 1024;

    #[test]
    fn deep_models_of_whole_blocks_take_the_tensor_cores() {
        assert!(takes(&shape(64, 3, Activation::Relu)));
        assert!(takes(&shape(16, 2, Activation::Tanh)));
        assert!(!takes(&shape(64, 1, Activation::Relu)), "one hidden layer");
        assert!(
            !takes(&shape(10, 3, Activation::Relu)),
            "not a multiple of 16"
        );
        assert!(!takes(&shape(64, 3, Activation::Gelu)), "gelu needs z");
    }

    #[test]
    fn tiles_leave_room_for_three_cubes_where_they_can() {
        assert_eq!(tile_points(&shape(64, 3, Activation::Relu), H200), Some(64));
        assert_eq!(
            tile_points(&shape(16, 2, Activation::Relu), H200),
            Some(128)
        );
        // 4 × 128: the weights alone take 104 KiB; one cube, 64 points.
        assert_eq!(
            tile_points(&shape(128, 4, Activation::Relu), H200),
            Some(64)
        );
        // 8 × 128: seven layers of weights do not fit beside any tile.
        assert_eq!(tile_points(&shape(128, 8, Activation::Relu), H200), None);
        for t in [16, 32, 64, 128] {
            assert!(
                tile_bytes(&shape(128, 4, Activation::Relu), t)
                    > tile_bytes(&shape(64, 4, Activation::Relu), t)
            );
        }
    }

    #[test]
    fn resident_cubes_are_the_tighter_of_shared_memory_and_registers() {
        // 3 × 64, 64 points: 56 KiB a cube, four by shared memory, three by
        // registers (80 a unit).
        let deep = shape(64, 3, Activation::Relu);
        assert_eq!(resident_cubes(&deep, 64, H200), 3);
        // 4 × 128: one by shared memory.
        assert_eq!(
            resident_cubes(&shape(128, 4, Activation::Relu), 64, H200),
            1
        );
        // A small shared memory: one.
        assert_eq!(resident_cubes(&deep, 64, 64 * 1024), 1);
    }

    #[test]
    fn a_plane_groups_blocks_that_divide_the_row_and_leave_no_plane_idle() {
        // Rows of 8 blocks (128 wide) over 4 rows of blocks (64 points): 4.
        assert_eq!(group(8, 4), 4);
        // 64 wide over 64 points: 4 a group would leave half the planes idle.
        assert_eq!(group(4, 4), 2);
        assert_eq!(group(4, 8), 4);
        assert_eq!(
            [1, 2, 3, 4, 5, 6, 7, 8].map(|b| group(b, 64)),
            [1, 2, 1, 4, 1, 2, 1, 4]
        );
        assert_eq!(group(2, 2), 1);
    }
}
