//! Gradient kernels compiled for a GPU this machine does not have, defined
//! on a wgpu device it has (lavapipe will do), so that their registers and
//! instructions can be counted off the GPU machine
//! (`benches/device/registers.py`):
//! - `tensor`: the tensor-core pass as the CUDA C++ of an sm_90 device (H100,
//!   H200) — the kernel expands under CUDA's target properties (its
//!   manual-MMA register layouts) and goes through CubeCL's CUDA compiler
//!   with the options its CUDA runtime sets for compute capability 9.0, so it
//!   is the source NVRTC gets there (a test checks that its shared-memory
//!   layout is the same at every compile) — and as the SPIR-V of NVIDIA's
//!   Vulkan driver (fragments through cooperative matrices, 48 KiB of
//!   workgroup memory), for a SPIR-V validator;
//! - `tiled`: the f32 tiled kernel with the tile, blocks and passes the
//!   engine picks on such a device (CUDA's 16-byte lined passes);
//! - [`persistent_steps`]: the persistent kernel's steps (the seed job's
//!   one-layer point pass) for the same sm_90 device.

mod tensor;
mod tiled;

pub use tensor::{scalar_extracts, tensor_pass, tensor_pass_spirv};
pub use tiled::tiled_pass;

use crate::config::{ModelSpec, TrainConfig};
use crate::engine::fused::gpu::kernels::args::{
    Exchange, ExchangeLaunch, Points, PointsLaunch, State, StateLaunch,
};
use crate::engine::fused::gpu::kernels::ops::{row_reduction, CUBE_UNITS};
use crate::engine::fused::gpu::kernels::persistent::{fused_steps::FusedSteps, Plan, PlanLaunch};
use crate::engine::fused::gpu::knobs::load_ahead;
pub use crate::engine::fused::gpu::limits::{SM90_SHARED, VULKAN_NVIDIA_SHARED};
use crate::engine::fused::gpu::shape::{Pass, Shape};
use crate::error::{FerroError, Result};
use cubecl::cuda::{CudaCompiler, CudaRuntime};
use cubecl::prelude::*;
use cubecl::wgpu::{WgpuDevice, WgpuRuntime};
use cubecl::{CompilationError, Compiler, CubeTask};

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
