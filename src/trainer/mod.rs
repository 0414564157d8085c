//! [`Trainer`]: the one way to train. It takes a validated job
//! ([`TrainConfig`]) and one device or several (data parallelism), chooses the
//! engine (fused when the job fits its envelope on that device), builds it
//! through the device's [`platform`], resumes from a checkpoint, writes
//! checkpoints, reports progress and returns the trained weights. The CLI,
//! `bench`, `tune`, `doctor` and the tests all come through here.
//!
//! ```ignore
//! let target = select(&Inventory::probe(), BackendKind::Auto, None)?;
//! let run = Trainer::new(cfg, target).engine(EngineKind::Auto).run()?;
//! println!("{}", run.outcome.final_loss);
//! ```

pub mod parallel;
pub mod phases;
pub mod probe;
pub mod reruns;

use crate::backend::guard::guarded;
use crate::backend::platform::platform;
use crate::backend::select::{self, Target};
use crate::batches::Batch;
use crate::config::{EngineKind, TrainConfig};
use crate::engine::checkpoint::Checkpoint;
use crate::engine::run::{self, no_checkpoints, Control, Progress, TrainOutcome};
use crate::engine::{Engine, FlatEngine};
use crate::error::{FerroError, Result};
use crate::model::Params;
use crate::record::RunRecord;
use crate::task::Dataset;
use std::path::PathBuf;

/// A finished run: what happened, the trained weights and which engine ran.
pub struct RunResult {
    /// Steps, times and the loss curve.
    pub outcome: TrainOutcome,
    /// The trained weights.
    pub params: Params,
    /// The engine that ran.
    pub engine: EngineKind,
    /// Why `auto` chose the general engine, when it did, and how the engine
    /// ran (the fused GPU kernel's launch scheme, the replicas).
    pub engine_note: Option<String>,
    /// Whether the engine's products ran on the tensor cores.
    pub tensor_cores: bool,
    /// Seconds spent building the engine (replicas: 0, they build in training).
    pub setup_seconds: f64,
}

impl RunResult {
    /// The run's record (it ran on `target` as `cfg` says) and its weights.
    pub fn into_record(self, target: &Target, cfg: &TrainConfig) -> (RunRecord, Params) {
        let mut record = RunRecord::new(
            target.label(),
            target.info.clone(),
            self.engine,
            self.engine_note,
            cfg,
            self.outcome,
        );
        record.startup.engine = self.setup_seconds;
        (record, self.params)
    }
}

/// A training run being set up; [`Trainer::run`] runs it.
pub struct Trainer<'p> {
    cfg: TrainConfig,
    targets: Vec<Target>,
    parallel: bool,
    want: EngineKind,
    init: Option<Params>,
    data: Option<Dataset>,
    validation: Option<Dataset>,
    resume: Option<Checkpoint>,
    checkpoints: Option<PathBuf>,
    progress: Option<&'p mut (dyn Progress + Send)>,
}

impl<'p> Trainer<'p> {
    /// Trains `cfg` on one device, from seeded weights, on the job's data.
    pub fn new(cfg: TrainConfig, target: Target) -> Self {
        Self::on(cfg, vec![target], false)
    }

    /// Trains `cfg` data-parallel, one replica per target (the fused engine;
    /// a target may repeat: several replicas on one device).
    pub fn replicas(cfg: TrainConfig, targets: Vec<Target>) -> Self {
        Self::on(cfg, targets, true)
    }

    fn on(cfg: TrainConfig, targets: Vec<Target>, parallel: bool) -> Self {
        Trainer {
            cfg,
            targets,
            parallel,
            want: EngineKind::Auto,
            init: None,
            data: None,
            validation: None,
            resume: None,
            checkpoints: None,
            progress: None,
        }
    }

    /// Which engine to use (default `auto`: fused where it fits).
    pub fn engine(mut self, want: EngineKind) -> Self {
        self.want = want;
        self
    }

    /// Starts from these weights instead of the seeded initialisation.
    pub fn init(mut self, init: Params) -> Self {
        self.init = Some(init);
        self
    }

    /// Trains on this data (host memory) instead of the job's task; `None`
    /// keeps the task's.
    pub fn data(mut self, data: impl Into<Option<Dataset>>) -> Self {
        self.data = data.into();
        self
    }

    /// Held-out rows: their loss is recorded at each log point (read back
    /// from the device, computed in f64), and `cfg.run.patience` stops on it.
    pub fn validation(mut self, data: impl Into<Option<Dataset>>) -> Self {
        self.validation = data.into();
        self
    }

    /// Continues from a checkpoint: its step, weights and optimizer state.
    pub fn resume(mut self, c: Checkpoint) -> Self {
        self.resume = Some(c);
        self
    }

    /// Writes checkpoints (every `cfg.checkpoint_every` steps, and on Ctrl-C) here.
    pub fn checkpoints(mut self, dir: PathBuf) -> Self {
        self.checkpoints = Some(dir);
        self
    }

    /// Reports each step (a progress bar, a log).
    pub fn progress(mut self, p: &'p mut (dyn Progress + Send)) -> Self {
        self.progress = Some(p);
        self
    }

    /// The engine this run will use and, when `auto` falls back to the
    /// general one, why.
    pub fn choice(&self) -> Result<(EngineKind, Option<String>)> {
        if self.parallel {
            return Ok((EngineKind::Fused, None));
        }
        choose_engine(&self.targets[0], &self.cfg, self.want)
    }

    /// Trains; returns the outcome and the trained weights.
    pub fn run(mut self) -> Result<RunResult> {
        self.cfg.validate()?;
        probe::host_memory(&self.cfg)?;
        if self.targets.is_empty() {
            return Err(FerroError::arg(
                "devices",
                "(none)",
                "name at least one device",
            ));
        }
        if self.parallel {
            return self.run_replicas();
        }
        let (kind, why) = self.choice()?;
        let ckpt = self.checkpoints.is_some() || self.resume.is_some();
        if kind == EngineKind::General && ckpt {
            let why = why.as_deref().unwrap_or("--engine general");
            return Err(no_checkpoints(&format!(
                "the general engine runs this job ({why})"
            )));
        }
        let target = self.targets[0].clone();
        let ctl = self.control(&target);
        let mut none = ();
        let progress: &mut dyn Progress = match self.progress.take() {
            Some(p) => p,
            None => &mut none,
        };
        guarded(&target, || {
            let built = std::time::Instant::now();
            let mut engine = self.build(&target, kind)?;
            let setup_seconds = built.elapsed().as_secs_f64();
            let outcome = run::train(&mut engine, &self.cfg, progress, &ctl)?;
            let e = engine.step();
            let note = match (why, e.detail()) {
                (Some(a), Some(b)) => Some(format!("{a}; {b}")),
                (a, b) => a.or(b),
            };
            Ok(RunResult {
                outcome,
                params: e.params()?,
                engine: kind,
                engine_note: note,
                tensor_cores: e.tensor_cores(),
                setup_seconds,
            })
        })
    }

    /// The chosen engine's gradient of the mean loss over `batch` at the
    /// starting weights, flat in [`Params::flatten`] order (for checks).
    pub fn gradient(mut self, batch: &Batch) -> Result<Vec<f32>> {
        // One gradient, no steps: the persistent kernel has nothing to run.
        self.cfg.kernel.persistent = false;
        let (kind, _) = self.choice()?;
        let target = self.targets[0].clone();
        guarded(&target, || {
            self.build(&target, kind)?.step().gradient(batch)
        })
    }

    fn control(&self, target: &Target) -> Control {
        Control {
            start_step: self.resume.as_ref().map_or(0, |c| c.step),
            checkpoints: self.checkpoints.clone(),
            device: (target.label(), target.info.index),
            validation: self.validation.clone(),
        }
    }

    /// The weights to start from: given, resumed, or seeded.
    fn start(&mut self) -> Params {
        let resumed = self.resume.as_ref().map(|c| c.params.clone());
        self.init
            .take()
            .or(resumed)
            .unwrap_or_else(|| Params::init(&self.cfg.model, self.cfg.seed))
    }

    /// The data on the host: given, or the task's (for engines that upload it).
    fn host_data(&mut self) -> Result<Dataset> {
        match self.data.take() {
            Some(d) => Ok(d),
            None => self.cfg.data.generate(self.cfg.n, self.cfg.seed),
        }
    }

    fn build(&mut self, target: &Target, kind: EngineKind) -> Result<Engine> {
        let p = platform(target.backend)?;
        let init = self.start();
        let mut engine = if kind == EngineKind::Fused {
            let data = self.host_data()?;
            Engine::Fused(p.fused(target, &self.cfg, data, init)?)
        } else {
            if self.data.is_none() && !self.cfg.kernel.data_on_device {
                self.data = Some(self.host_data()?);
            }
            Engine::General(p.general(target, &self.cfg, &init, self.data.as_ref())?)
        };
        if let (Some(c), Some(flat)) = (&self.resume, engine.flat()) {
            flat.load_optimizer_state(&c.opt)?;
        }
        Ok(engine)
    }

    fn run_replicas(mut self) -> Result<RunResult> {
        let init = self.start();
        let data = self.host_data()?;
        let ctl = self.control(&self.targets[0]);
        let mut none = ();
        let progress: &mut (dyn Progress + Send) = match self.progress.take() {
            Some(p) => p,
            None => &mut none,
        };
        let shared = parallel::Shared {
            cfg: &self.cfg,
            ctl: &ctl,
            opt: self.resume.as_ref().map(|c| &c.opt),
        };
        let (outcome, params) = parallel::train(&shared, &self.targets, init, data, progress)?;
        Ok(RunResult {
            outcome,
            params,
            engine: EngineKind::Fused,
            engine_note: Some(format!(
                "data-parallel over {} replicas: {}",
                self.targets.len(),
                select::describe(&self.targets)
            )),
            // The replicas' engines live in `parallel::train`: the plan each takes.
            tensor_cores: self.targets.iter().all(|t| tensor_cores(t, &self.cfg)),
            setup_seconds: 0.0,
        })
    }
}

/// The engine that will run `cfg` on `target` for a request.
pub fn choose_engine(
    target: &Target,
    cfg: &TrainConfig,
    want: EngineKind,
) -> Result<(EngineKind, Option<String>)> {
    let fits = platform(target.backend).and_then(|p| p.fits(target, cfg));
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

/// Whether the fused engine runs `cfg` (in f16 or bf16) on `target`'s
/// tensor cores; elsewhere half precision is emulated, no faster than f32.
pub fn tensor_cores(target: &Target, cfg: &TrainConfig) -> bool {
    cfg.precision != crate::config::Precision::F32
        && platform(target.backend).is_ok_and(|p| p.tensor_cores(target, cfg))
}

/// A data-parallel replica's fused engine on `target`.
pub(crate) fn fused_replica(
    target: &Target,
    cfg: &TrainConfig,
    data: Dataset,
    init: Params,
) -> Result<Box<dyn FlatEngine>> {
    let p = platform(target.backend)?;
    p.fits(target, cfg)?;
    // A replica's micro-batch is a shard of the step, never a whole step, so
    // the persistent kernel would not run: skip probing for it.
    let cfg = &TrainConfig {
        kernel: crate::config::KernelKnobs {
            persistent: false,
            ..cfg.kernel.clone()
        },
        ..cfg.clone()
    };
    p.fused(target, cfg, data, init)
}
