//! Typed devices. [`Api`] is what the inventory finds (a compute API, possibly
//! one ferrofit cannot train on, such as `gl`); [`Backend`] is what a run
//! trains on once the user's request has been resolved — the CPU, a wgpu API
//! or CUDA — so code past selection matches three cases, never strings.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A compute API as the inventory lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// The host processor (the fused CPU kernel, Burn's flex backend).
    Cpu,
    /// NVIDIA's CUDA, through CubeCL (NVRTC at run time).
    Cuda,
    /// Vulkan through wgpu.
    Vulkan,
    /// Direct3D 12 through wgpu.
    Dx12,
    /// Metal through wgpu.
    Metal,
    /// OpenGL through wgpu: listed, never trained on.
    Gl,
}

/// A wgpu API ferrofit trains on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WgpuApi {
    /// Vulkan.
    Vulkan,
    /// Direct3D 12.
    Dx12,
    /// Metal.
    Metal,
}

/// What a resolved run trains on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The host processor.
    Cpu,
    /// A GPU through wgpu, on one of its APIs.
    Wgpu(WgpuApi),
    /// An NVIDIA GPU through CUDA.
    Cuda,
}

impl Api {
    /// Every API, for parsing.
    pub const ALL: [Api; 6] = [
        Api::Cpu,
        Api::Cuda,
        Api::Vulkan,
        Api::Dx12,
        Api::Metal,
        Api::Gl,
    ];

    /// The name people and records use: `cpu`, `cuda`, `vulkan`, ...
    pub fn name(self) -> &'static str {
        match self {
            Api::Cpu => "cpu",
            Api::Cuda => "cuda",
            Api::Vulkan => "vulkan",
            Api::Dx12 => "dx12",
            Api::Metal => "metal",
            Api::Gl => "gl",
        }
    }

    /// The API named `s` (as [`Api::name`] writes it), if any.
    pub fn parse(s: &str) -> Option<Api> {
        Api::ALL.into_iter().find(|a| a.name() == s)
    }

    /// Whether this build compiles this API's kernels to SPIR-V itself
    /// (CubeCL's SPIR-V compiler, the `vulkan-spirv` feature) rather than
    /// writing WGSL for wgpu.
    pub fn spirv(self) -> bool {
        cfg!(feature = "vulkan-spirv") && self == Api::Vulkan
    }

    /// The backend that trains on this API; `None` for APIs listed only.
    pub fn backend(self) -> Option<Backend> {
        match self {
            Api::Cpu => Some(Backend::Cpu),
            Api::Cuda => Some(Backend::Cuda),
            Api::Vulkan => Some(Backend::Wgpu(WgpuApi::Vulkan)),
            Api::Dx12 => Some(Backend::Wgpu(WgpuApi::Dx12)),
            Api::Metal => Some(Backend::Wgpu(WgpuApi::Metal)),
            Api::Gl => None,
        }
    }
}

impl fmt::Display for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

impl Backend {
    /// The API this backend runs on.
    pub fn api(self) -> Api {
        match self {
            Backend::Cpu => Api::Cpu,
            Backend::Cuda => Api::Cuda,
            Backend::Wgpu(WgpuApi::Vulkan) => Api::Vulkan,
            Backend::Wgpu(WgpuApi::Dx12) => Api::Dx12,
            Backend::Wgpu(WgpuApi::Metal) => Api::Metal,
        }
    }

    /// True for the GPU backends.
    pub fn is_gpu(self) -> bool {
        self != Backend::Cpu
    }

    /// The cargo feature that compiles this backend in.
    pub fn feature(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Wgpu(_) => "wgpu",
            Backend::Cuda => "cuda",
        }
    }

    /// Whether this build has the backend.
    pub fn compiled(self) -> bool {
        match self {
            Backend::Cpu => cfg!(feature = "cpu"),
            Backend::Wgpu(_) => cfg!(feature = "wgpu"),
            Backend::Cuda => cfg!(feature = "cuda"),
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.api().name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_only_gl_has_no_backend() {
        for a in Api::ALL {
            assert_eq!(Api::parse(a.name()), Some(a));
            assert_eq!(a.backend().map(Backend::api), (a != Api::Gl).then_some(a));
            let json = serde_json::to_string(&a).unwrap();
            assert_eq!(json, format!("\"{a}\""));
        }
        assert_eq!(Api::parse("wgpu"), None);
    }
}
