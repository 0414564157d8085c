//! What each compiled backend builds: the general engine on its Burn backend
//! and the fused engine on its kernels. [`platform`] is the one `match` with
//! the backends' `cfg` arms; each arm is a unit type in its own file, and the
//! rest of ferrofit sees only the [`Platform`] trait and boxed engines.

#[cfg(feature = "cpu")]
mod cpu;
#[cfg(feature = "cuda")]
mod cuda;
#[cfg(feature = "wgpu")]
mod wgpu;

use super::device::Backend;
use super::select::Target;
use crate::config::TrainConfig;
use crate::engine::{FlatEngine, StepEngine};
use crate::error::{FerroError, Result};
use crate::model::Params;
use crate::task::Dataset;

/// Burn's CPU backend, where the data-parallel collective sums gradients.
pub type Host = burn::backend::Flex;

/// The engines one backend builds.
pub trait Platform: Sync {
    /// The general (Burn autodiff) engine from `init`, on `host` data if given
    /// (else the task's, made on the device).
    fn general(
        &self,
        t: &Target,
        cfg: &TrainConfig,
        init: &Params,
        host: Option<&Dataset>,
    ) -> Result<Box<dyn StepEngine>>;

    /// The fused engine on `data` from `init`; the caller checked [`Platform::fits`].
    fn fused(
        &self,
        t: &Target,
        cfg: &TrainConfig,
        data: Dataset,
        init: Params,
    ) -> Result<Box<dyn FlatEngine>>;

    /// Ok when the fused engine takes `cfg` on `t`, else why not.
    fn fits(&self, t: &Target, cfg: &TrainConfig) -> Result<()>;

    /// Whether the fused engine runs `cfg`'s f16/bf16 on `t`'s tensor cores
    /// (elsewhere it emulates them, at f32's speed or below).
    fn tensor_cores(&self, _t: &Target, _cfg: &TrainConfig) -> bool {
        false
    }
}

/// The general engine on Burn backend `B` (each platform's [`Platform::general`]).
pub(crate) fn general_on<B: burn::tensor::backend::AutodiffBackend>(
    cfg: &TrainConfig,
    init: &Params,
    host: Option<&Dataset>,
    device: &B::Device,
) -> Result<Box<dyn StepEngine>> {
    Ok(Box::new(crate::engine::general::GeneralEngine::<B>::new(
        cfg, init, host, device,
    )?))
}

/// The fused GPU engine on CubeCL runtime `R` (each GPU platform's
/// [`Platform::fused`]), keeping what it measures in `memo` (the kernel
/// cache's folder, where the platform has one).
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub(crate) fn gpu_fused_on<R: cubecl::Runtime>(
    cfg: &TrainConfig,
    data: &Dataset,
    init: Params,
    device: &R::Device,
    software: bool,
    memo: Option<std::path::PathBuf>,
) -> Box<dyn FlatEngine> {
    use crate::engine::fused::gpu::memo::Memo;
    Box::new(crate::engine::fused::gpu::GpuFused::<R>::new(
        cfg,
        data,
        init,
        device,
        software,
        Memo::at(memo),
    ))
}

/// The platform of `backend`, or the error naming the cargo feature it needs.
pub fn platform(backend: Backend) -> Result<&'static dyn Platform> {
    match backend {
        #[cfg(feature = "cpu")]
        Backend::Cpu => Ok(&cpu::Cpu),
        #[cfg(feature = "wgpu")]
        Backend::Wgpu(_) => Ok(&wgpu::Wgpu),
        #[cfg(feature = "cuda")]
        Backend::Cuda => Ok(&cuda::Cuda),
        #[allow(unreachable_patterns)]
        other => Err(FerroError::BackendNotCompiled {
            backend: other.api().name(),
            feature: other.feature(),
        }),
    }
}
