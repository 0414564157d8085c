//! The fused engine on GPUs, as CubeCL kernels (one source for Vulkan, DX12
//! and Metal through wgpu, and CUDA).
//!
//! - `buffers`: the engine's device memory, allocated once;
//! - `engine`: [`GpuFused`], its kernel settings and the [`crate::engine::StepEngine`] /
//!   [`crate::engine::FlatEngine`] implementation;
//! - `shape`: [`shape::Shape`] and [`shape::Pass`], the comptime values every kernel is
//!   compiled for;
//! - `launch`: the buffers into CubeCL's `launch` calls (two launches a step);
//!   `note`: which kernel runs the pass and how, in words (`engine_note`);
//! - `tensor`: the host side of the tensor-core pass (does the device run it;
//!   its launches); `tensor_plan`: its shared-memory layout and tile, and the
//!   cubes a multiprocessor holds; `tiled_plan`: the tiled kernel's register
//!   blocks and units a cube;
//! - `steps`: the host side of the persistent kernel (queued full-batch steps,
//!   the per-device grid probe); `memo`: what the engine measured about its
//!   device, kept between runs (the probe's answer);
//! - `kernels/`: the `#[cube]` kernels themselves, one file a kernel family,
//!   and the device math they share. A new kernel is a new file there plus
//!   its launch;
//! - `kernel_source/` (with both `wgpu` and `cuda`): the tensor-core pass's,
//!   the f32 tiled kernel's and the persistent kernel's CUDA C++ (and the
//!   tensor-core pass's SPIR-V for NVIDIA's Vulkan driver) without that GPU,
//!   for counting their registers, checking their shared layout and
//!   validating them anywhere;
//! - `limits`: the shared memory of the GPUs ferrofit is measured on (the
//!   planners' tests and `kernel_source` plan against them);
//! - `compiler`: which shader compiler CubeCL runs them through, in words
//!   (for `engine_note` and refusals); `knobs`: the environment switches for
//!   measuring the kernels another way.

pub mod buffers;
pub mod compiler;
mod engine;
#[cfg(all(feature = "wgpu", feature = "cuda"))]
pub mod kernel_source;
// CubeCL's derives and `#[cube]` generate public items without docs.
#[allow(missing_docs)]
pub mod kernels;
mod knobs;
pub mod launch;
pub mod limits;
pub mod memo;
mod note;
pub mod shape;
pub mod steps;
pub mod tensor;
pub mod tensor_plan;
pub mod tiled_plan;

pub(crate) use buffers::pod_bytes;
pub use engine::*;
