//! The tensor-core gradient pass (`kernels::tensor`, `kernels::strips`)
//! compiled off the GPU: [`tensor_pass`], the CUDA C++ an sm_90 device's
//! NVRTC gets; [`tensor_pass_spirv`], the SPIR-V NVIDIA's Vulkan driver gets,
//! with [`scalar_extracts`] finding the fault that crashed that driver.

use super::{compile, compile_only, compiler_error, placeholder, sm90_options, CudaTarget};
use crate::config::Precision;
use crate::engine::fused::gpu::kernels::args::{Batch, BatchLaunch, Points, PointsLaunch};
use crate::engine::fused::gpu::kernels::strips::strips_grad::StripsGrad;
use crate::engine::fused::gpu::kernels::tensor::tensor_grad::TensorGrad;
use crate::engine::fused::gpu::shape::{Pass, Shape};
use crate::engine::fused::gpu::tensor_plan::plan;
use crate::error::{FerroError, Result};
use cubecl::cuda::CudaCompiler;
use cubecl::prelude::*;
use cubecl::wgpu::vulkan::VkSpirvCompiler;
use cubecl::wgpu::{WgpuDevice, WgpuRuntime};
use cubecl::{CompilationError, Compiler, VulkanCompilationOptions, WgpuCompilationOptions};

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
