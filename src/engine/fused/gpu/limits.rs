//! Limits of the GPUs ferrofit is measured on, as their drivers report them:
//! the planners' tests plan against them, and `kernel_source` compiles the
//! tensor-core pass for them on a machine that has no such GPU.

/// Shared memory a cube may opt into on an H100 or H200 (CUDA's
/// `MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`, 227 KiB), in bytes.
pub const SM90_SHARED: usize = 232_448;

/// Workgroup memory NVIDIA's Vulkan driver allows a workgroup
/// (`maxComputeSharedMemorySize`, 48 KiB), in bytes.
pub const VULKAN_NVIDIA_SHARED: usize = 49_152;

/// Threads a cube may have on an H100 or H200 (CUDA's
/// `MAX_THREADS_PER_BLOCK`).
pub const SM90_UNITS: usize = 1024;
