//! [`Reruns`]: one job trained again and again from the same start on one
//! device — `bench`'s warm-up and timed runs of a row. The fused engine is
//! built once: each run after the first restarts its weights and optimizer
//! state on the device ([`crate::engine::FlatEngine::restart`]) and trains on the data
//! already uploaded, so no run pays for, or is slowed by, a fresh upload of
//! the points and the device memory behind it. The general engine is built
//! afresh each run, as `train` builds it.

use super::Trainer;
use crate::backend::guard::guarded;
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
    /// Why `auto` chose the general engine, when it did.
    note: Option<String>,
    init: Params,
    ctl: Control,
    engine: Option<Engine>,
}

impl Reruns {
    /// Runs of `cfg` on `target` with the engine `want` resolves to (checked
    /// here: an engine that cannot run the job fails now).
    pub fn new(cfg: &TrainConfig, target: Target, want: EngineKind) -> Result<Self> {
        let trainer = Trainer::new(cfg.clone(), target.clone()).engine(want);
        let (kind, note) = trainer.choice()?;
        Ok(Reruns {
            init: Params::init(&cfg.model, cfg.seed),
            ctl: trainer.control(&target),
            target,
            kind,
            note,
            engine: None,
        })
    }

    /// The engine the runs use.
    pub fn kind(&self) -> EngineKind {
        self.kind
    }

    /// Why `auto` chose the general engine, when it did.
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// One run of `cfg` from the seeded weights. `cfg` is the job given to
    /// [`Reruns::new`]; only its run control (log points, first-step timing)
    /// may differ from run to run.
    pub fn run(&mut self, cfg: &TrainConfig) -> Result<TrainOutcome> {
        let mut trainer = Trainer::new(cfg.clone(), self.target.clone()).engine(self.kind);
        if self.kind != EngineKind::Fused {
            return Ok(trainer.run()?.outcome);
        }
        cfg.validate()?;
        let target = self.target.clone();
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
                    trainer.build(&target, self.kind)?
                }
            };
            // Kept only when the run succeeds: a failed one is rebuilt.
            let engine = self.engine.insert(engine);
            let outcome = run::train(engine, cfg, &mut (), &self.ctl);
            if outcome.is_err() {
                self.engine = None;
            }
            outcome
        })
    }
}
