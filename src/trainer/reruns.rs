//! [`Reruns`]: one job trained again and again from the same start on one
//! device — `bench`'s warm-up and timed runs of a row. The fused engine is
//! built once: each run after the first restarts its weights and optimizer
//! state on the device ([`FlatEngine::restart`]) and trains on the data
//! already uploaded, so no run pays for, or is slowed by, a fresh upload of
//! the points and the device memory behind it. The general engine is built
//! afresh each run, as `train` builds it.

use super::{choose_engine, RunResult, Trainer};
use crate::backend::guard::guarded;
use crate::backend::platform::platform;
use crate::backend::select::Target;
use crate::config::{EngineKind, TrainConfig};
use crate::engine::run::{self, Control, TrainOutcome};
use crate::engine::Engine;
use crate::error::Result;
use crate::model::Params;

/// One job's runs on one device, the fused engine kept between them.
pub struct Reruns {
    target: Target,
    kind: EngineKind,
    init: Params,
    engine: Option<Engine>,
}

impl Reruns {
    /// Runs of `cfg` on `target` with the engine `want` resolves to (checked
    /// here: an engine that cannot run the job fails now).
    pub fn new(cfg: &TrainConfig, target: Target, want: EngineKind) -> Result<Self> {
        let (kind, _) = choose_engine(&target, cfg, want)?;
        Ok(Reruns {
            init: Params::init(&cfg.model, cfg.seed),
            target,
            kind,
            engine: None,
        })
    }

    /// The engine the runs use.
    pub fn kind(&self) -> EngineKind {
        self.kind
    }

    /// One run of `cfg` from the seeded weights. `cfg` is the job given to
    /// [`Reruns::new`]; only its run control (log points, first-step timing)
    /// may differ from run to run.
    pub fn run(&mut self, cfg: &TrainConfig) -> Result<TrainOutcome> {
        if self.kind != EngineKind::Fused {
            let r: RunResult = Trainer::new(cfg.clone(), self.target.clone())
                .engine(self.kind)
                .run()?;
            return Ok(r.outcome);
        }
        cfg.validate()?;
        let target = self.target.clone();
        let ctl = Control {
            start_step: 0,
            checkpoints: None,
            device: (target.label(), target.info.index),
            validation: None,
        };
        guarded(&target, || {
            let engine = match self.engine.take() {
                Some(mut e) => {
                    if let Some(flat) = e.flat() {
                        flat.restart(&self.init)?;
                    }
                    e
                }
                None => {
                    super::probe::host_memory(cfg)?;
                    let data = cfg.data.generate(cfg.n, cfg.seed)?;
                    let p = platform(target.backend)?;
                    Engine::Fused(p.fused(&target, cfg, data, self.init.clone())?)
                }
            };
            // Kept only when the run succeeds: a failed one is rebuilt.
            let engine = self.engine.insert(engine);
            let outcome = run::train(engine, cfg, &mut (), &ctl);
            if outcome.is_err() {
                self.engine = None;
            }
            outcome
        })
    }
}
