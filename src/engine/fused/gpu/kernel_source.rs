//! The tensor-core gradient pass compiled for a GPU this machine does not
//! have, defined on a wgpu device it has (lavapipe will do):
//! - [`tensor_pass`]: the CUDA C++ of an sm_90 device (H100, H200) — the
//!   kernel expands under CUDA's target properties (its manual-MMA register
//!   layouts) and goes through CubeCL's CUDA compiler with the options its
//!   CUDA runtime sets for compute capability 9.0, so it is the source NVRTC
//!   gets there: `benches/device/registers.py` counts its registers, and a
//!   test checks that its shared-memory layout is the same at every compile;
//! - [`tensor_pass_spirv`]: the SPIR-V of NVIDIA's Vulkan driver (fragments
//!   through cooperative matrices, 48 KiB of workgroup memory, the features
//!   that driver reports to CubeCL), for a SPIR-V validator;
//!   [`scalar_extracts`] finds in it the fault that crashed that driver;
//! - [`persistent_steps`]: the CUDA C++ of the persistent kernel's steps
//!   (the seed job's one-layer point pass) for the same sm_90 device, so its
//!   registers and instructions can be counted off the GPU machine.

use crate::config::{ModelSpec, Precision, TrainConfig};
use crate::engine::fused::gpu::kernels::args::{
    Batch, BatchLaunch, Exchange, ExchangeLaunch, Points, PointsLaunch, State, StateLaunch,
};
use crate::engine::fused::gpu::kernels::ops::{row_reduction, CUBE_UNITS};
use crate::engine::fused::gpu::kernels::persistent::{fused_steps::FusedSteps, Plan, PlanLaunch};
use crate::engine::fused::gpu::kernels::strips::strips_grad::StripsGrad;
use crate::engine::fused::gpu::kernels::tensor::tensor_grad::TensorGrad;
use crate::engine::fused::gpu::knobs::load_ahead;
pub use crate::engine::fused::gpu::limits::{SM90_SHARED, VULKAN_NVIDIA_SHARED};
use crate::engine::fused::gpu::shape::{Pass, Shape};
use crate::engine::fused::gpu::tensor_plan::plan;
use crate::error::{FerroError, Result};
use cubecl::cuda::{CudaCompiler, CudaRuntime};
use cubecl::prelude::*;
use cubecl::wgpu::vulkan::VkSpirvCompiler;
use cubecl::wgpu::{WgpuDevice, WgpuRuntime};
use cubecl::{
    CompilationError, Compiler, CubeTask, VulkanCompilationOptions, WgpuCompilationOptions,
};

/// wgpu's server under CUDA's target properties.
#[derive(Debug, Clone)]
struct CudaTarget;

impl Runtime for CudaTarget {
    type Compiler = <WgpuRuntime as Runtime>::Compiler;
    type Server = <WgpuRuntime as Runtime>::Server;
    type Device = WgpuDevice;

    fn client(device: &WgpuDevice) -> ComputeClient<Self> {
        // The same server as wgpu's own client (the registry is keyed by
        // server type and device).
        let _ = WgpuRuntime::client(device);
        ComputeClient::load(device)
    }
    fn name(_: &ComputeClient<Self>) -> &'static str {
        "cuda-source"
    }
    fn max_cube_count() -> (u32, u32, u32) {
        CudaRuntime::max_cube_count()
    }
    fn can_read_tensor(shape: &cubecl::zspace::Shape, strides: &cubecl::zspace::Strides) -> bool {
        WgpuRuntime::can_read_tensor(shape, strides)
    }
    fn target_properties() -> cubecl::ir::TargetProperties {
        CudaRuntime::target_properties()
    }
    fn enumerate_devices(
        type_id: u16,
        info: &<Self::Server as cubecl::server::ComputeServer>::Info,
    ) -> Vec<cubecl::device::DeviceId> {
        WgpuRuntime::enumerate_devices(type_id, info)
    }
}

/// CubeCL's CUDA compiler options as its CUDA runtime sets them for
/// compute capability 9.0.
fn sm90_options() -> <CudaCompiler as Compiler>::CompilationOptions {
    let mut opts = <CudaCompiler as Compiler>::CompilationOptions::default();
    let features = &mut opts.supports_features;
    features.fast_math = true;
    features.grid_constants = true;
    features.fast_tanh = true;
    features.clusters = true;
    features.elect_sync = true;
    opts
}

/// The persistent kernel (`kernels::persistent`) for `shape`, one unit a
/// point (a one-hidden-layer model whose row fits a unit: the seed job), as
/// an sm_90 device with planes of 32 runs it, in CUDA C++, defined on the
/// wgpu `device` (`FERROFIT_LOAD_AHEAD` names another group of points, as
/// on the GPU).
pub fn persistent_steps(device: &WgpuDevice, shape: Shape) -> Result<String> {
    let (scatter, scratch) = row_reduction(shape.params() + 1, true, 32, 1);
    let pass = Pass {
        plane: true,
        scatter,
        scratch,
        ahead: load_ahead(),
        lanes: 1,
        ..Pass::default()
    };
    let client = CudaTarget::client(device);
    let (settings, mut launcher) = compile_only::<CudaTarget>(CUBE_UNITS);
    // SAFETY: the kernel is compiled, never launched: no buffer is read.
    let (points, state, exchange, plan) = unsafe {
        let arr = |n| placeholder(&client, n);
        (
            PointsLaunch::<f32, CudaTarget>::new(arr(16), arr(16), arr(1)),
            StateLaunch::<f32, CudaTarget>::new(arr(16), arr(16), arr(16), arr(2)),
            ExchangeLaunch::<CudaTarget>::new(arr(16), arr(16), arr(1)),
            PlanLaunch::<f32, CudaTarget>::new(arr(16), arr(16), 1, 0, 1, 0.0),
        )
    };
    let points = <Points<f32> as LaunchArg>::register(points, &mut launcher);
    let state = <State<f32> as LaunchArg>::register(state, &mut launcher);
    let exchange = <Exchange as LaunchArg>::register(exchange, &mut launcher);
    let plan = <Plan<f32> as LaunchArg>::register(plan, &mut launcher);
    let kernel = FusedSteps::<f32, CudaTarget>::new(
        settings, client, points, state, exchange, plan, shape, pass,
    );
    compile::<_, CudaCompiler>(kernel, &sm90_options())
        .map(|k| k.source)
        .map_err(|e| compiler_error("cuda-source", e))
}

/// The tensor-core pass for `shape` in `precision` (f16 or bf16) as an
/// sm_90 device with `max_shared` bytes a cube runs it, in CUDA C++,
/// defined on the wgpu `device`.
pub fn tensor_pass(
    device: &WgpuDevice,
    shape: Shape,
    precision: Precision,
    max_shared: usize,
) -> Result<String> {
    let pass = pass_of(&shape, max_shared, true)?;
    let client = CudaTarget::client(device);
    let k =
        by_operand::<CudaTarget, CudaCompiler>(&client, shape, pass, precision, &sm90_options())?;
    Ok(k.source)
}

/// The tensor-core pass for `shape` in `precision` as NVIDIA's Vulkan
/// driver would get it from CubeCL's SPIR-V compiler (cooperative-matrix
/// fragments, `max_shared` bytes of workgroup memory), defined on the wgpu
/// `device`: the module's words.
pub fn tensor_pass_spirv(
    device: &WgpuDevice,
    shape: Shape,
    precision: Precision,
    max_shared: usize,
) -> Result<Vec<u32>> {
    let pass = pass_of(&shape, max_shared, false)?;
    let client = WgpuRuntime::client(device);
    // As CubeCL's Vulkan backend sets them for NVIDIA's driver 580 (its
    // debug log of the device's features).
    let opts = WgpuCompilationOptions {
        supports_u64: true,
        supports_vulkan: true,
        vulkan: VulkanCompilationOptions {
            supports_fp_fast_math: true,
            supports_explicit_smem: true,
            supports_uniform_standard_layout: true,
            max_spirv_version: (1, 6),
            ..Default::default()
        },
    };
    let k = by_operand::<WgpuRuntime, VkSpirvCompiler>(&client, shape, pass, precision, &opts)?;
    k.repr
        .map(|r| r.assembled_module)
        .ok_or_else(|| FerroError::BackendFailed {
            backend: "vulkan".into(),
            detail: "CubeCL's SPIR-V compiler returned no module".into(),
        })
}

/// The shape of the seed job's recipe (one input and output, relu, MSE,
/// SGD) with `layers` hidden layers of `hidden` units: the models the
/// kernels are looked at for.
pub fn seed_shape(hidden: usize, layers: usize) -> Shape {
    let defaults = TrainConfig::default();
    Shape::of(&TrainConfig {
        model: ModelSpec {
            hidden,
            layers,
            ..defaults.model
        },
        ..defaults
    })
}

/// The pass the engine runs for `shape` with `max_shared` bytes a cube:
/// CUDA's with manual MMA (`manual`), else SPIR-V's.
fn pass_of(shape: &Shape, max_shared: usize, manual: bool) -> Result<Pass> {
    let p = plan(shape, max_shared, manual).ok_or_else(|| FerroError::OutsideEnvelope {
        reason: format!("no tensor-core plan fits {shape:?}"),
    })?;
    Ok(Pass {
        plane: true,
        tile: p.tile,
        tensor: Some(p),
        spirv: !manual,
        ..Pass::default()
    })
}

/// [`source`] in the operand type of `precision`, errors in words.
fn by_operand<R: Runtime, C: Compiler + Default>(
    client: &ComputeClient<R>,
    shape: Shape,
    pass: Pass,
    precision: Precision,
    opts: &C::CompilationOptions,
) -> Result<CompiledKernel<C>> {
    let compiled = match precision {
        Precision::F16 => source::<R, C, half::f16>(client, shape, pass, opts),
        Precision::Bf16 => source::<R, C, half::bf16>(client, shape, pass, opts),
        Precision::F32 => {
            return Err(FerroError::OutsideEnvelope {
                reason: "the tensor-core pass takes f16 or bf16".into(),
            })
        }
    };
    compiled.map_err(|e| compiler_error(R::name(client), e))
}

/// A compile error of CubeCL's for `backend`, in words.
fn compiler_error(backend: &str, e: CompilationError) -> FerroError {
    FerroError::BackendFailed {
        backend: backend.into(),
        detail: format!("CubeCL's compiler: {e}"),
    }
}

/// The settings and launcher of a kernel compiled, never launched, with
/// `units` a cube (32-bit addresses, as ferrofit launches its kernels).
fn compile_only<R: Runtime>(units: u32) -> (KernelSettings, KernelLauncher<R>) {
    let settings = KernelSettings::default()
        .cube_dim(CubeDim::new_1d(units))
        .address_type(AddressType::U32);
    let launcher = KernelLauncher::<R>::new(settings.clone());
    (settings, launcher)
}

/// A buffer of `n` f32-sized values to stand for a kernel argument.
///
/// # Safety
/// Only for kernels that are compiled and never launched: nothing is in it.
unsafe fn placeholder<R: Runtime>(client: &ComputeClient<R>, n: usize) -> ArrayArg<R> {
    // SAFETY: `n` values were allocated; the caller never launches the kernel.
    unsafe { ArrayArg::from_raw_parts(client.empty(n * 4), n) }
}

/// Where `src` places its shared arrays: (offset in bytes, array index), by offset.
pub fn shared_layout(src: &str) -> Vec<(usize, usize)> {
    let mut at: Vec<(usize, usize)> = src
        .lines()
        .filter_map(|l| {
            let (head, tail) = l.split_once("*>(&dynamic_shared_mem[")?;
            let index = head
                .rsplit("shared_memory_")
                .next()?
                .split_whitespace()
                .next()?;
            Some((tail.split(']').next()?.parse().ok()?, index.parse().ok()?))
        })
        .collect();
    at.sort_unstable();
    at
}

/// Components taken of scalars in the SPIR-V module `words`: an
/// `OpCompositeExtract` of a value an `OpLoad` read as a scalar — what CubeCL
/// makes of a vector view of shared memory, a module SPIRV-Tools' validator
/// rejects and NVIDIA's Vulkan driver crashed on while making the pipeline.
pub fn scalar_extracts(words: &[u32]) -> usize {
    // SPIR-V's opcodes.
    const TYPE_BOOL: u32 = 20;
    const TYPE_INT: u32 = 21;
    const TYPE_FLOAT: u32 = 22;
    const LOAD: u32 = 61;
    const EXTRACT: u32 = 81;
    let mut scalar_types = std::collections::HashSet::new();
    let mut scalar_loads = std::collections::HashSet::new();
    let mut found = 0;
    // After the five-word header: instructions of (length << 16 | opcode), operands.
    let mut at = 5;
    while let Some(&head) = words.get(at) {
        let (len, op) = ((head >> 16) as usize, head & 0xffff);
        let ops = words.get(at + 1..at + len.max(1)).unwrap_or(&[]);
        match (op, ops) {
            (TYPE_BOOL | TYPE_INT | TYPE_FLOAT, [id, ..]) => {
                scalar_types.insert(*id);
            }
            (LOAD, [ty, id, ..]) if scalar_types.contains(ty) => {
                scalar_loads.insert(*id);
            }
            (EXTRACT, [_, _, of, ..]) if scalar_loads.contains(of) => found += 1,
            _ => {}
        }
        at += len.max(1);
    }
    found
}

/// One compile of the pass `pass` names, operands of type E, by compiler C.
fn source<R: Runtime, C: Compiler + Default, E: Float + CubeElement>(
    client: &ComputeClient<R>,
    shape: Shape,
    pass: Pass,
    opts: &C::CompilationOptions,
) -> std::result::Result<CompiledKernel<C>, CompilationError> {
    let units = pass.tensor.map_or(256, |p| p.units) as u32;
    let (settings, mut launcher) = compile_only::<R>(units);
    // SAFETY: the kernel is compiled, never launched: no buffer is read.
    let (points, params, half, partials) = unsafe {
        let arr = |n| placeholder(client, n);
        (
            PointsLaunch::<f32, R>::new(arr(16), arr(16), arr(1)),
            arr(16),
            arr(16),
            arr(16),
        )
    };
    let points = <Points<f32> as LaunchArg>::register(points, &mut launcher);
    let params = <Array<f32> as LaunchArg>::register(params, &mut launcher);
    let half = <Array<E> as LaunchArg>::register(half, &mut launcher);
    let partials = <Array<f32> as LaunchArg>::register(partials, &mut launcher);
    let batch = <Batch<f32> as LaunchArg>::register(BatchLaunch::new(0, 16, 1.0), &mut launcher);
    let c = client.clone();
    if pass.tensor.is_some_and(|p| p.strips) {
        compile::<_, C>(
            StripsGrad::<f32, E, R>::new(
                settings, c, points, params, half, partials, batch, shape, pass,
            ),
            opts,
        )
    } else {
        compile::<_, C>(
            TensorGrad::<f32, E, R>::new(
                settings, c, points, params, half, partials, batch, shape, pass,
            ),
            opts,
        )
    }
}

/// `kernel` through compiler C with `opts`, unchecked as ferrofit launches it.
fn compile<K: CubeKernel, C: Compiler + Default>(
    kernel: K,
    opts: &C::CompilationOptions,
) -> std::result::Result<CompiledKernel<C>, CompilationError> {
    let task = KernelTask::<C, _>::new(kernel);
    let addr = task.address_type();
    task.compile(
        &mut Default::default(),
        opts,
        ExecutionMode::Unchecked,
        addr,
    )
}
