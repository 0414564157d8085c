//! The fused engine: a whole MLP training step without whole-batch intermediates.
//!
//! `cpu` runs it on all cores in Rust; `gpu` runs it as CubeCL kernels on any wgpu
//! or CUDA device: one persistent launch for many full-batch steps, or two
//! launches per step. Both check [`envelope::check`] first.

pub mod cpu;
pub mod cpu_kernel;
#[cfg(target_arch = "x86_64")]
pub mod cpu_simd;
pub mod envelope;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod gpu;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod gpu_kernel;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod gpu_math;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod gpu_ops;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod gpu_persistent;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod gpu_steps;
pub mod optim;

/// Limits of the GPU kernels, available in every build.
pub mod gpu_kernel_limits {
    /// Largest hidden width of the GPU kernels (each unit keeps a whole
    /// gradient: past ~32 hidden units it spills registers, still far faster
    /// than the general engine).
    pub const MAX_GPU_HIDDEN: usize = 64;
    /// Most parameters the GPU kernels take: one cube's units must cover a
    /// gradient row plus the loss (`np + 1 <= 256`).
    pub const MAX_GPU_PARAMS: usize = 255;
}
