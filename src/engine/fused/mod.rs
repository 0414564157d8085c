//! The fused engine: a whole MLP training step without whole-batch intermediates.
//!
//! `cpu` runs it on all cores in Rust; `gpu` runs it as CubeCL kernels on any wgpu
//! or CUDA device: one persistent launch for many full-batch steps, or two
//! launches per step (always two for deep or wide models: `gpu_tiled`). Both check [`envelope::check`] first.

pub mod cpu;
pub mod cpu_block;
pub mod cpu_kernel;
#[cfg(target_arch = "x86_64")]
pub mod cpu_simd;
pub mod envelope;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod gpu;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod gpu_kernel;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod gpu_launch;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod gpu_layers;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod gpu_math;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod gpu_ops;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod gpu_persistent;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod gpu_split;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod gpu_steps;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod gpu_tiled;
pub mod optim;

/// Limits of the GPU kernels, available in every build.
pub mod gpu_kernel_limits {
    /// Largest hidden width of the GPU kernels (wide layers are split across
    /// a plane's lanes, see `gpu_split`).
    pub const MAX_GPU_HIDDEN: usize = 128;
    /// Most parameters of a one-hidden-layer model the per-point GPU kernels
    /// take: the persistent kernel keeps the weights, both moments and a
    /// gradient row in shared memory (12 KiB at this limit, under the 16 KiB
    /// every WebGPU device has). Larger models, and deeper ones, take the
    /// tiled kernel (`gpu_tiled`).
    pub const MAX_GPU_PARAMS: usize = 767;
}
