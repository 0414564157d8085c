//! Backends: what the user can ask for ([`BackendKind`], `--backend`), what
//! this machine has (`devices`), how a request becomes one typed device
//! (`select` → [`select::Target`], a [`device::Backend`] and its adapter), and
//! the engines each backend builds (`platform`, the only module that names
//! Burn's and CubeCL's concrete backends and holds their `cfg` arms).

pub mod collective;
pub mod device;
pub mod devices;
pub mod guard;
pub mod kernel_cache;
pub mod platform;
pub mod select;

pub use device::{Api, Backend, WgpuApi};

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

/// The `--backend` choices: a request, resolved once by [`select::select`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// CUDA, then a discrete GPU, then an integrated GPU, then the CPU.
    Auto,
    /// All CPU cores (Burn flex for the general engine).
    Cpu,
    /// Any wgpu adapter: Vulkan, DX12 or Metal, whichever the OS has.
    Wgpu,
    /// wgpu restricted to Vulkan.
    Vulkan,
    /// wgpu restricted to DirectX 12.
    Dx12,
    /// wgpu restricted to Metal.
    Metal,
    /// NVIDIA CUDA (driver loaded at run time).
    Cuda,
    /// AMD ROCm/HIP (optional cargo feature `rocm`).
    Rocm,
}

impl BackendKind {
    /// The cargo feature that compiles this backend in.
    pub fn feature(self) -> &'static str {
        match self {
            BackendKind::Auto | BackendKind::Cpu => "cpu",
            BackendKind::Wgpu | BackendKind::Vulkan | BackendKind::Dx12 | BackendKind::Metal => {
                "wgpu"
            }
            BackendKind::Cuda => "cuda",
            BackendKind::Rocm => "rocm",
        }
    }

    /// The name used in output.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Auto => "auto",
            BackendKind::Cpu => "cpu",
            BackendKind::Wgpu => "wgpu",
            BackendKind::Vulkan => "vulkan",
            BackendKind::Dx12 => "dx12",
            BackendKind::Metal => "metal",
            BackendKind::Cuda => "cuda",
            BackendKind::Rocm => "rocm",
        }
    }
}

impl BackendKind {
    /// Error unless this build has the backend the request needs.
    pub fn compiled(self) -> crate::Result<()> {
        let on = match self {
            BackendKind::Auto | BackendKind::Cpu => cfg!(feature = "cpu"),
            BackendKind::Wgpu | BackendKind::Vulkan | BackendKind::Dx12 | BackendKind::Metal => {
                cfg!(feature = "wgpu")
            }
            BackendKind::Cuda => cfg!(feature = "cuda"),
            BackendKind::Rocm => cfg!(feature = "rocm"),
        };
        if on {
            Ok(())
        } else {
            Err(crate::FerroError::BackendNotCompiled {
                backend: self.name(),
                feature: self.feature(),
            })
        }
    }

    /// The API a request names, when it names exactly one.
    pub fn api(self) -> Option<Api> {
        match self {
            BackendKind::Cpu => Some(Api::Cpu),
            BackendKind::Cuda => Some(Api::Cuda),
            BackendKind::Vulkan => Some(Api::Vulkan),
            BackendKind::Dx12 => Some(Api::Dx12),
            BackendKind::Metal => Some(Api::Metal),
            BackendKind::Auto | BackendKind::Wgpu | BackendKind::Rocm => None,
        }
    }
}

impl From<Backend> for BackendKind {
    /// The request that selects exactly this backend's API.
    fn from(b: Backend) -> Self {
        match b {
            Backend::Cpu => BackendKind::Cpu,
            Backend::Cuda => BackendKind::Cuda,
            Backend::Wgpu(WgpuApi::Vulkan) => BackendKind::Vulkan,
            Backend::Wgpu(WgpuApi::Dx12) => BackendKind::Dx12,
            Backend::Wgpu(WgpuApi::Metal) => BackendKind::Metal,
        }
    }
}
