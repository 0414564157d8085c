//! Backends: what the user can ask for (`--backend`), what this machine has
//! (`devices`), and how a request becomes a concrete device (`select`).
//! Only `dispatch.rs` names Burn's concrete backend types.

pub mod collective;
pub mod devices;
pub mod dispatch;
pub mod select;

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

/// The `--backend` choices.
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
