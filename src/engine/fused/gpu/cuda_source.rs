//! The CUDA C++ that CubeCL makes of the tensor-core gradient pass, on a
//! machine without an NVIDIA GPU: the kernel is defined against a wgpu
//! device (lavapipe will do) under CUDA's target properties — so that it
//! expands as it does for CUDA, manual-MMA register layouts included — then
//! put through CubeCL's CUDA compiler with the options its CUDA runtime sets
//! for compute capability 9.0 (H100, H200). The result is the source NVRTC
//! gets on the GPU machine: `benches/device/registers.py` counts its
//! registers anywhere, and a test checks that its shared-memory layout is
//! the same at every compile.

use crate::config::Precision;
use crate::engine::fused::gpu::kernels::args::{Batch, BatchLaunch, Points, PointsLaunch};
use crate::engine::fused::gpu::kernels::strips::strips_grad::StripsGrad;
use crate::engine::fused::gpu::kernels::tensor::tensor_grad::TensorGrad;
use crate::engine::fused::gpu::shape::{Pass, Shape};
use crate::engine::fused::gpu::tensor_plan::plan;
use crate::error::{FerroError, Result};
use cubecl::cuda::{CudaCompiler, CudaRuntime};
use cubecl::prelude::*;
use cubecl::wgpu::{WgpuDevice, WgpuRuntime};
use cubecl::{Compiler, CubeTask};

/// Shared memory a cube may opt into on an H100 or H200 (bytes).
pub const SM90_SHARED: usize = 232_448;

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

/// The tensor-core pass for `shape` in `precision` (f16 or bf16) as an
/// sm_90 device with `max_shared` bytes a cube runs it, in CUDA C++,
/// defined on the wgpu `device`.
pub fn tensor_pass(
    device: &WgpuDevice,
    shape: Shape,
    precision: Precision,
    max_shared: usize,
) -> Result<String> {
    let p = plan(&shape, max_shared, true).ok_or_else(|| FerroError::OutsideEnvelope {
        reason: format!("no tensor-core plan fits {shape:?}"),
    })?;
    let pass = Pass {
        plane: true,
        tile: p.tile,
        tensor: Some(p),
        ..Pass::default()
    };
    let client = CudaTarget::client(device);
    let compiled = match precision {
        Precision::F16 => source::<half::f16>(&client, shape, pass),
        Precision::Bf16 => source::<half::bf16>(&client, shape, pass),
        Precision::F32 => {
            return Err(FerroError::OutsideEnvelope {
                reason: "the tensor-core pass takes f16 or bf16".into(),
            })
        }
    };
    compiled.map_err(|e| FerroError::BackendFailed {
        backend: "cuda".into(),
        detail: format!("CubeCL's CUDA compiler: {e}"),
    })
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

/// One compile of the pass `pass` names, operands of type E.
fn source<E: Float + CubeElement>(
    client: &ComputeClient<CudaTarget>,
    shape: Shape,
    pass: Pass,
) -> std::result::Result<String, cubecl::CompilationError> {
    let units = pass.tensor.map_or(256, |p| p.units) as u32;
    let settings = KernelSettings::default()
        .cube_dim(CubeDim::new_1d(units))
        .address_type(AddressType::U32);
    let mut launcher = KernelLauncher::<CudaTarget>::new(settings.clone());
    let buf = |n: usize| client.empty(n * 4);
    // SAFETY: the kernel is compiled, never launched: no buffer is read.
    let (points, params, half, partials) = unsafe {
        (
            PointsLaunch::<f32, CudaTarget>::new(
                ArrayArg::from_raw_parts(buf(16), 16),
                ArrayArg::from_raw_parts(buf(16), 16),
                ArrayArg::from_raw_parts(buf(1), 1),
            ),
            ArrayArg::from_raw_parts(buf(16), 16),
            ArrayArg::from_raw_parts(buf(16), 16),
            ArrayArg::from_raw_parts(buf(16), 16),
        )
    };
    let points = <Points<f32> as LaunchArg>::register(points, &mut launcher);
    let params = <Array<f32> as LaunchArg>::register(params, &mut launcher);
    let half = <Array<E> as LaunchArg>::register(half, &mut launcher);
    let partials = <Array<f32> as LaunchArg>::register(partials, &mut launcher);
    let batch = <Batch<f32> as LaunchArg>::register(BatchLaunch::new(0, 16, 1.0), &mut launcher);
    let c = client.clone();
    if pass.tensor.is_some_and(|p| p.strips) {
        compile(StripsGrad::<f32, E, CudaTarget>::new(
            settings, c, points, params, half, partials, batch, shape, pass,
        ))
    } else {
        compile(TensorGrad::<f32, E, CudaTarget>::new(
            settings, c, points, params, half, partials, batch, shape, pass,
        ))
    }
}

/// `kernel` through CubeCL's CUDA compiler with the options `cubecl-cuda`
/// sets for compute capability 9.0, unchecked as ferrofit launches it.
fn compile<K: CubeKernel>(kernel: K) -> std::result::Result<String, cubecl::CompilationError> {
    let task = KernelTask::<CudaCompiler, _>::new(kernel);
    let mut opts = <CudaCompiler as Compiler>::CompilationOptions::default();
    let features = &mut opts.supports_features;
    features.fast_math = true;
    features.grid_constants = true;
    features.fast_tanh = true;
    features.clusters = true;
    features.elect_sync = true;
    let addr = task.address_type();
    let compiled = task.compile(
        &mut Default::default(),
        &opts,
        ExecutionMode::Unchecked,
        addr,
    )?;
    Ok(compiled.source)
}
