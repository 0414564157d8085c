//! Which shader compiler CubeCL runs the fused kernels through on a device,
//! in words: `engine_note` and the refusals of a kernel a compiler cannot
//! build name it (on Vulkan the SPIR-V and WGSL builds behave differently;
//! docs/PERFORMANCE.md, "SPIR-V on Vulkan").

use cubecl::prelude::{ComputeClient, Runtime};

/// Whether CubeCL runs `client`'s kernels through NVRTC (CUDA).
pub fn nvrtc<R: Runtime>(client: &ComputeClient<R>) -> bool {
    R::name(client) == "cuda"
}

/// Whether CubeCL compiles `client`'s kernels to SPIR-V itself (Vulkan).
pub fn spirv<R: Runtime>(client: &ComputeClient<R>) -> bool {
    R::name(client) == "wgpu<spirv>"
}

/// The shader compiler CubeCL runs for `client`, in words.
pub fn compiler<R: Runtime>(client: &ComputeClient<R>) -> &'static str {
    match R::name(client) {
        "cuda" => "CUDA C++ (NVRTC)",
        "hip" => "HIP C++ (hipRTC)",
        "wgpu<spirv>" => "SPIR-V (CubeCL's compiler)",
        "wgpu<msl>" => "Metal Shading Language",
        _ => "WGSL (naga)",
    }
}
