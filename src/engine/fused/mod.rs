//! The fused engine: a whole MLP training step without whole-batch intermediates.
//!
//! `cpu` runs it on all cores in Rust; `gpu` runs it as CubeCL kernels on any wgpu
//! or CUDA device: one persistent launch for many full-batch steps, or two
//! launches per step (always two for deep or wide models: `tiled`). Both check [`envelope::check`] first.
//! In f16/bf16 both round the hidden-to-hidden products' operands as [`half`]
//! says where no tensor core computes them.

pub mod cpu;
pub mod envelope;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod gpu;
pub mod half;
pub mod optim;

/// Limits of the GPU kernels, available in every build.
pub mod gpu_kernel_limits {
    /// Largest hidden width of the GPU kernels (wide layers are split across
    /// a plane's lanes, see `split`).
    pub const MAX_GPU_HIDDEN: usize = 128;
    /// Most parameters of a one-hidden-layer model the per-point GPU kernels
    /// take: the persistent kernel keeps the weights, both moments and a
    /// gradient row in shared memory (12 KiB at this limit, under the 16 KiB
    /// every WebGPU device has). Larger models, and deeper ones, take the
    /// tiled kernel (`tiled`).
    pub const MAX_GPU_PARAMS: usize = 767;

    /// Whether a model of `layers` hidden layers and `params` parameters
    /// takes the tiled kernel in f32 (several hidden layers, or more than
    /// [`MAX_GPU_PARAMS`]): the engine's choice, which `tune` asks too.
    pub fn takes_tiled(layers: usize, params: usize) -> bool {
        layers > 1 || params > MAX_GPU_PARAMS
    }
}
