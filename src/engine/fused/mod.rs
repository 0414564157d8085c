//! The fused engine: a whole MLP training step without whole-batch intermediates.
//!
//! `cpu` runs it on all cores in Rust; `gpu` runs it as two CubeCL kernels on
//! any wgpu or CUDA device. Both check [`envelope::check`] first.

pub mod cpu;
pub mod cpu_kernel;
pub mod envelope;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod gpu;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod gpu_kernel;
pub mod optim;

/// Limits of the GPU kernels, available in every build.
pub mod gpu_kernel_limits {
    /// Largest hidden width the register-resident GPU design supports.
    pub const MAX_GPU_HIDDEN: usize = 32;
    /// Most parameters the GPU kernel keeps per-unit accumulators for (registers).
    pub const MAX_GPU_PARAMS: usize = 128;
}
