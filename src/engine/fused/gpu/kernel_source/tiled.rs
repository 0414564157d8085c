//! The f32 tiled kernel (`kernels::tiled`) compiled off the GPU: the CUDA
//! C++ an sm_90 device's NVRTC gets, with the tile, register blocks and
//! passes the engine picks there (the 16-byte lined passes, no bounds
//! checks) — `FERROFIT_TILED_BLOCKS` and `FERROFIT_ROWS_AHEAD` name others,
//! as on the GPU — so that a change to its passes can be weighed in
//! registers and spills before a device run. With `vulkan`, the layout the
//! engine picks on NVIDIA's Vulkan driver instead (48 KiB, the one-value
//! passes), still as CUDA C++: NVRTC's registers for that kernel, a proxy
//! for what the Vulkan driver's compiler makes of its SPIR-V.

use super::{compile, compile_only, compiler_error, placeholder, sm90_options, CudaTarget};
use crate::engine::fused::gpu::kernels::args::{Batch, BatchLaunch, Points, PointsLaunch};
use crate::engine::fused::gpu::kernels::tiled::tiled_grad::TiledGrad;
use crate::engine::fused::gpu::limits::{SM90_SHARED, SM90_UNITS, VULKAN_NVIDIA_SHARED};
use crate::engine::fused::gpu::shape::{Blocks, Pass, Shape};
use crate::engine::fused::gpu::tiled_plan::{tiled_layout, TiledDevice};
use crate::error::Result;
use cubecl::cuda::CudaCompiler;
use cubecl::prelude::*;
use cubecl::wgpu::WgpuDevice;

/// The f32 tiled kernel for `shape` as an sm_90 device runs it (with
/// `vulkan`, in the layout of NVIDIA's Vulkan driver), in CUDA C++, defined
/// on the wgpu `device`; and the tile and blocks it was compiled for.
pub fn tiled_pass(
    device: &WgpuDevice,
    shape: Shape,
    vulkan: bool,
) -> Result<(String, usize, Blocks)> {
    let sm90 = TiledDevice {
        max_shared: if vulkan {
            VULKAN_NVIDIA_SHARED
        } else {
            SM90_SHARED
        },
        max_units: SM90_UNITS,
        plane: true,
        cuda: !vulkan,
        checked: false,
    };
    let (tile, blocks) = tiled_layout(&shape, sm90, None);
    // The one-layer kernels' fields (row reduction, loads ahead, lanes) do
    // not reach this kernel.
    let pass = Pass {
        plane: true,
        tile,
        blocks,
        ..Pass::default()
    };
    let client = CudaTarget::client(device);
    let (settings, mut launcher) = compile_only::<CudaTarget>(blocks.cube as u32);
    // SAFETY: the kernel is compiled, never launched: no buffer is read.
    let (points, params, partials) = unsafe {
        let arr = |n| placeholder(&client, n);
        (
            PointsLaunch::<f32, CudaTarget>::new(arr(16), arr(16), arr(1)),
            arr(16),
            arr(16),
        )
    };
    let points = <Points<f32> as LaunchArg>::register(points, &mut launcher);
    let params = <Array<f32> as LaunchArg>::register(params, &mut launcher);
    let partials = <Array<f32> as LaunchArg>::register(partials, &mut launcher);
    let batch = <Batch<f32> as LaunchArg>::register(BatchLaunch::new(0, 16, 1.0), &mut launcher);
    let kernel = TiledGrad::<f32, CudaTarget>::new(
        settings, client, points, params, partials, batch, shape, pass,
    );
    let source = compile::<_, CudaCompiler>(kernel, &sm90_options())
        .map(|k| k.source)
        .map_err(|e| compiler_error("cuda-source", e))?;
    Ok((source, tile, blocks))
}
