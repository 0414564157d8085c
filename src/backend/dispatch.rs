//! The one place that names Burn's concrete backends: each compiled backend is
//! a small `cfg` arm that calls the generic engine code. Panics from a backend
//! (a lost device, a driver fault) become [`FerroError::BackendFailed`].

use super::select::Target;
use super::BackendKind;
use crate::batches::Batch;
use crate::config::{EngineKind, TrainConfig};
use crate::engine::checkpoint::OptState;
use crate::engine::fused::cpu::CpuFused;
use crate::engine::fused::envelope;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
use crate::engine::fused::gpu::GpuFused;
use crate::engine::general::GeneralEngine;
use crate::engine::run::{self, Control, Progress, TrainOutcome};
use crate::engine::StepEngine;
use crate::error::{FerroError, Result};
use crate::model::Params;
use crate::task::{Dataset, Task};
use burn::tensor::backend::AutodiffBackend;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A finished run: what happened, the trained weights and which engine ran.
pub struct RunResult {
    pub outcome: TrainOutcome,
    pub params: Params,
    pub engine: EngineKind,
    /// Why `auto` chose the general engine, when it did, and how the engine
    /// ran (the fused GPU kernel's launch scheme).
    pub engine_note: Option<String>,
}

/// The engine that will run `cfg` on `target` for a request.
pub fn choose_engine(
    target: &Target,
    cfg: &TrainConfig,
    want: EngineKind,
) -> Result<(EngineKind, Option<String>)> {
    let fits = fused_available(target, cfg);
    match (want, fits) {
        (EngineKind::General, _) => Ok((EngineKind::General, None)),
        (_, Ok(())) => Ok((EngineKind::Fused, None)),
        (EngineKind::Fused, Err(e)) => Err(e),
        (EngineKind::Auto, Err(FerroError::OutsideEnvelope { reason })) => {
            Ok((EngineKind::General, Some(reason)))
        }
        (EngineKind::Auto, Err(e)) => Err(e),
    }
}

fn fused_available(target: &Target, cfg: &TrainConfig) -> Result<()> {
    match target.kind {
        BackendKind::Cpu => envelope::check(cfg),
        BackendKind::Wgpu | BackendKind::Cuda => envelope::check_gpu(cfg),
        other => Err(FerroError::OutsideEnvelope {
            reason: format!("no fused kernel for {} yet", other.name()),
        }),
    }
}

/// Trains `cfg` on `target` from seeded initial weights; the data is the task's,
/// made on the device unless `cfg.data_on_device` is false.
pub fn train(
    target: &Target,
    cfg: &TrainConfig,
    want: EngineKind,
    progress: &mut dyn Progress,
) -> Result<RunResult> {
    let init = Params::init(&cfg.model, cfg.seed);
    // The fused engine makes host data itself when given none (`train_from`).
    let host = if cfg.data_on_device {
        None
    } else {
        Some(Task::parse(&cfg.task)?.generate(cfg.n, cfg.seed))
    };
    train_from(target, cfg, want, init, host, progress)
}

/// Trains from given initial weights and (optionally) given host data.
pub fn train_from(
    target: &Target,
    cfg: &TrainConfig,
    want: EngineKind,
    init: Params,
    host: Option<Dataset>,
    progress: &mut dyn Progress,
) -> Result<RunResult> {
    train_controlled(
        target,
        cfg,
        want,
        init,
        host,
        progress,
        &Control::default(),
        None,
    )
}

/// [`train_from`] with checkpoints and a start step; `opt` restores a
/// checkpoint's optimizer state.
#[allow(clippy::too_many_arguments)]
pub fn train_controlled(
    target: &Target,
    cfg: &TrainConfig,
    want: EngineKind,
    init: Params,
    host: Option<Dataset>,
    progress: &mut dyn Progress,
    ctl: &Control,
    opt: Option<&OptState>,
) -> Result<RunResult> {
    cfg.validate()?;
    let (engine, engine_note) = choose_engine(target, cfg, want)?;
    if engine == EngineKind::General && (ctl.checkpoints.is_some() || opt.is_some()) {
        return Err(FerroError::OutsideEnvelope {
            reason: format!(
                "checkpoints need the fused engine's optimizer state, and the general engine runs this job ({})",
                engine_note.as_deref().unwrap_or("--engine general")
            ),
        });
    }
    guarded(target, || {
        let mut eng: Box<dyn StepEngine> = match engine {
            EngineKind::Fused => {
                let data = match host {
                    Some(d) => d,
                    None => Task::parse(&cfg.task)?.generate(cfg.n, cfg.seed),
                };
                fused_engine(target, cfg, data, init)?
            }
            _ => general_engine(target, cfg, &init, host.as_ref())?,
        };
        if let Some(o) = opt {
            eng.load_optimizer_state(o)?;
        }
        let outcome = run::train_with(eng.as_mut(), cfg, progress, ctl)?;
        let params = eng.params()?;
        let engine_note = match (engine_note.clone(), eng.detail()) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        };
        Ok(RunResult {
            outcome,
            params,
            engine,
            engine_note,
        })
    })
}

/// The general engine's gradient of the mean loss over `batch` (for checks).
pub fn general_gradient(
    target: &Target,
    cfg: &TrainConfig,
    params: &Params,
    data: &Dataset,
    batch: &Batch,
) -> Result<Vec<f32>> {
    fn grad<B: AutodiffBackend>(
        d: &B::Device,
        cfg: &TrainConfig,
        p: &Params,
        data: &Dataset,
        batch: &Batch,
    ) -> Result<Vec<f32>> {
        Ok(GeneralEngine::<B>::new(cfg, p, Some(data), d)?.gradient(batch))
    }
    guarded(target, || match target.kind {
        #[cfg(feature = "cpu")]
        BackendKind::Cpu => grad::<cpu::B>(&Default::default(), cfg, params, data, batch),
        #[cfg(feature = "wgpu")]
        BackendKind::Wgpu => {
            grad::<wgpu_arm::B>(&wgpu_arm::device(target)?, cfg, params, data, batch)
        }
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => grad::<cuda::B>(&cuda::device(target), cfg, params, data, batch),
        other => Err(unsupported(other)),
    })
}

/// True for a GPU API implemented on the CPU (lavapipe).
fn software(target: &Target) -> bool {
    target.info.class == super::devices::DeviceClass::Software
}

fn fused_engine(
    target: &Target,
    cfg: &TrainConfig,
    data: Dataset,
    init: Params,
) -> Result<Box<dyn StepEngine>> {
    match target.kind {
        #[cfg(feature = "wgpu")]
        BackendKind::Wgpu => Ok(Box::new(GpuFused::<cubecl::wgpu::WgpuRuntime>::new(
            cfg,
            &data,
            init,
            &wgpu_arm::device(target)?,
            software(target),
        ))),
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => Ok(Box::new(GpuFused::<cubecl::cuda::CudaRuntime>::new(
            cfg,
            &data,
            init,
            &cuda::device(target),
            false,
        ))),
        _ => Ok(Box::new(CpuFused::new(cfg, data, init))),
    }
}

/// The fused GPU engine's gradient of the mean loss over `batch` (for checks).
pub fn fused_gpu_gradient(
    target: &Target,
    cfg: &TrainConfig,
    params: &Params,
    data: &Dataset,
    batch: &Batch,
) -> Result<Vec<f32>> {
    envelope::check_gpu(cfg)?;
    // One gradient, no steps: the persistent kernel has nothing to run.
    let cfg = &TrainConfig {
        persistent: false,
        ..cfg.clone()
    };
    guarded(target, || match target.kind {
        #[cfg(feature = "wgpu")]
        BackendKind::Wgpu => GpuFused::<cubecl::wgpu::WgpuRuntime>::new(
            cfg,
            data,
            params.clone(),
            &wgpu_arm::device(target)?,
            software(target),
        )
        .gradient(batch),
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => GpuFused::<cubecl::cuda::CudaRuntime>::new(
            cfg,
            data,
            params.clone(),
            &cuda::device(target),
            false,
        )
        .gradient(batch),
        other => Err(FerroError::OutsideEnvelope {
            reason: format!("no fused GPU kernel for {}", other.name()),
        }),
    })
}

fn general_engine(
    target: &Target,
    cfg: &TrainConfig,
    init: &Params,
    host: Option<&Dataset>,
) -> Result<Box<dyn StepEngine>> {
    match target.kind {
        #[cfg(feature = "cpu")]
        BackendKind::Cpu => Ok(Box::new(GeneralEngine::<cpu::B>::new(
            cfg,
            init,
            host,
            &Default::default(),
        )?)),
        #[cfg(feature = "wgpu")]
        BackendKind::Wgpu => Ok(Box::new(GeneralEngine::<wgpu_arm::B>::new(
            cfg,
            init,
            host,
            &wgpu_arm::device(target)?,
        )?)),
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => Ok(Box::new(GeneralEngine::<cuda::B>::new(
            cfg,
            init,
            host,
            &cuda::device(target),
        )?)),
        other => Err(unsupported(other)),
    }
}

thread_local! {
    /// True while this thread runs backend code whose panics become errors.
    static GUARDED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Guarded sections running on any thread. While one runs, a panic on a
/// backend's own worker thread (CubeCL's device threads) surfaces as that
/// section's error, so its default report is not printed either.
static GUARDED_ANYWHERE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Installs a panic hook that stays quiet for panics [`guarded`] turns into
/// errors (the error says what happened) and prints all others as usual.
pub fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let worker = std::thread::current().name() != Some("main")
            && GUARDED_ANYWHERE.load(std::sync::atomic::Ordering::SeqCst) > 0;
        if !(GUARDED.with(|g| g.get()) || worker) {
            default(info);
        }
    }));
}

/// The error for a backend this build cannot run the general engine on.
fn unsupported(kind: BackendKind) -> FerroError {
    super::select::compiled(kind)
        .err()
        .unwrap_or(FerroError::NoDevice {
            backend: kind.name().into(),
            detail: "not supported by the general engine yet".into(),
        })
}

/// Runs `f`, turning a backend panic into an error.
fn guarded<T>(target: &Target, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let was = GUARDED.with(|g| g.replace(true));
    GUARDED_ANYWHERE.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let out = catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let detail = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "unknown panic".into());
        Err(FerroError::BackendFailed {
            backend: target.label(),
            detail: detail.trim().to_string(),
        })
    });
    GUARDED_ANYWHERE.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    GUARDED.with(|g| g.set(was));
    out
}

#[cfg(feature = "cpu")]
mod cpu {
    pub type B = burn::backend::Autodiff<burn::backend::Flex>;
}

#[cfg(feature = "cuda")]
pub(crate) mod cuda {
    use super::Target;
    pub type B = burn::backend::Autodiff<burn::backend::Cuda>;
    pub fn device(t: &Target) -> burn::backend::cuda::CudaDevice {
        burn::backend::cuda::CudaDevice::new(t.info.index)
    }
}

#[cfg(feature = "wgpu")]
pub mod wgpu_arm {
    //! wgpu devices: maps an adapter to CubeCL's device id and initialises it once.
    use super::Target;
    use crate::backend::devices::{wgpu_adapters, wgpu_api_name};
    use crate::error::{FerroError, Result};
    use cubecl::wgpu::{init_setup, Dx12, Metal, RuntimeOptions, Vulkan, WgpuDevice};
    use std::collections::HashMap;
    use std::sync::Mutex;

    pub type B = burn::backend::Autodiff<burn::backend::Wgpu>;

    static READY: Mutex<Option<HashMap<(String, usize), WgpuDevice>>> = Mutex::new(None);

    /// The CubeCL device for the target adapter, set up on first use.
    pub fn device(t: &Target) -> Result<WgpuDevice> {
        let key = (t.info.api.clone(), t.info.index);
        let mut ready = READY.lock().unwrap_or_else(|e| e.into_inner());
        let map = ready.get_or_insert_with(HashMap::new);
        if let Some(d) = map.get(&key) {
            return Ok(d.clone());
        }
        let backend = match t.info.api.as_str() {
            "vulkan" => wgpu::Backend::Vulkan,
            "dx12" => wgpu::Backend::Dx12,
            "metal" => wgpu::Backend::Metal,
            other => {
                return Err(FerroError::NoDevice {
                    backend: other.into(),
                    detail: "only Vulkan, DX12 and Metal adapters are supported".into(),
                })
            }
        };
        let adapters = wgpu_adapters(backend.into());
        let me = adapters
            .get(t.info.index)
            .ok_or_else(|| FerroError::NoDevice {
                backend: t.label(),
                detail: "the adapter disappeared".into(),
            })?;
        let ty = me.get_info().device_type;
        let k = adapters[..t.info.index]
            .iter()
            .filter(|a| a.get_info().device_type == ty)
            .count();
        let device = match ty {
            wgpu::DeviceType::DiscreteGpu => WgpuDevice::DiscreteGpu(k),
            wgpu::DeviceType::IntegratedGpu => WgpuDevice::IntegratedGpu(k),
            wgpu::DeviceType::VirtualGpu => WgpuDevice::VirtualGpu(k),
            wgpu::DeviceType::Cpu if k == 0 => WgpuDevice::Cpu,
            _ => {
                return Err(FerroError::NoDevice {
                    backend: t.label(),
                    detail: format!("adapter type {ty:?} #{k} cannot be addressed"),
                })
            }
        };
        debug_assert_eq!(wgpu_api_name(backend), t.info.api);
        let opts = RuntimeOptions::default();
        match backend {
            wgpu::Backend::Vulkan => drop(init_setup::<Vulkan>(&device, opts)),
            wgpu::Backend::Dx12 => drop(init_setup::<Dx12>(&device, opts)),
            _ => drop(init_setup::<Metal>(&device, opts)),
        }
        map.insert(key, device.clone());
        Ok(device)
    }
}

/// Builds the fused engine of `target` (for data-parallel replicas).
pub fn fused_replica(
    target: &Target,
    cfg: &TrainConfig,
    data: Dataset,
    init: Params,
) -> Result<Box<dyn StepEngine>> {
    fused_available(target, cfg)?;
    // A replica's micro-batch is a shard of the step, never a whole step, so
    // the persistent kernel would not run: skip probing for it.
    let cfg = &TrainConfig {
        persistent: false,
        ..cfg.clone()
    };
    fused_engine(target, cfg, data, init)
}
