//! The training loop shared by every engine: schedule, accumulation, logging,
//! early stop on a target loss, and timing between device synchronisations.

use super::checkpoint::{self, Checkpoint};
use super::{Engine, FlatEngine, StepEngine};
use crate::batches::BatchPlan;
use crate::config::TrainConfig;
use crate::error::{FerroError, Result};
use crate::model::reference;
use crate::schedule::lr_at;
use crate::task::Dataset;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A point on the loss curve.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LossPoint {
    /// Optimizer step (0-based: the last of a 100-step run is 99).
    pub step: usize,
    /// Training loss there.
    pub loss: f64,
    /// Seconds since training started.
    pub seconds: f64,
    /// Loss on the held-out rows at this step (`--csv` data).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub val_loss: Option<f64>,
}

/// What a training run produced.
#[derive(Clone, Debug, Serialize)]
pub struct TrainOutcome {
    /// Optimizer steps taken.
    pub steps: usize,
    /// Training loss at the last step.
    pub final_loss: f64,
    /// Wall time of the steps, first included.
    pub train_seconds: f64,
    /// Steps a second after the first.
    pub steps_per_second: f64,
    /// Time of the first step alone (kernel compilation, autotune, allocation).
    pub first_step_seconds: f64,
    /// Loss at each log point.
    pub curve: Vec<LossPoint>,
    /// Whether the run reached its target loss.
    pub reached_target: bool,
    /// Steps skipped by f16 loss scaling.
    pub skipped_steps: usize,
}

/// Something that wants to hear about progress (a progress bar, a log).
pub trait Progress {
    /// Step `step` (0-based) is done; `loss` when it was read back.
    fn update(&mut self, step: usize, loss: Option<f64>);

    /// Whether the run should stop after this step (a caller's Ctrl-C,
    /// Python's KeyboardInterrupt); checked every step, so keep it cheap.
    fn stop(&mut self) -> bool {
        false
    }
}

impl Progress for () {
    fn update(&mut self, _: usize, _: Option<f64>) {}
}

/// Loss-scaling skips in a row that mean divergence, not a scale to lower:
/// f16 scaling starts at 2^16 and halves per skip, so 24 skips in a row have
/// reached a scale of 1 and still overflowed.
const MAX_SKIPS_IN_A_ROW: usize = 24;

/// Where a run starts and where it keeps checkpoints.
#[derive(Clone, Debug, Default)]
pub struct Control {
    /// Steps already done (a resumed run starts here).
    pub start_step: usize,
    /// Folder for `cfg.checkpoint_every` checkpoints (and one on Ctrl-C).
    pub checkpoints: Option<PathBuf>,
    /// Backend name and device index, recorded in checkpoints.
    pub device: (String, usize),
    /// Held-out rows whose loss each log point records (and `patience` watches).
    pub validation: Option<Dataset>,
}

/// Waits until everything queued while the engine was built (the data set's
/// upload) has finished, so the clock measures training, not set-up: a
/// device sync, then a read-back. With the sync alone, a data-parallel run of
/// the seed job on 2× H200 (CUDA) paid ~10 ms of set-up in its first step.
pub fn ready(engine: &mut dyn StepEngine) -> Result<()> {
    engine.sync()?;
    engine.params().map(|_| ())
}

/// Writes a checkpoint after `done` steps, refusing non-finite weights.
pub(crate) fn save_checkpoint(
    engine: &mut dyn FlatEngine,
    cfg: &TrainConfig,
    ctl: &Control,
    dir: &Path,
    done: usize,
) -> Result<PathBuf> {
    let loss = engine.last_loss()?;
    if !loss.is_finite() {
        return Err(FerroError::Diverged {
            step: done - 1,
            value: loss as f32,
        });
    }
    // The grid the steps ran on, so that a resume sums in the same order.
    let mut config = cfg.clone();
    config.kernel.grid = engine.launch_grid().or(cfg.kernel.grid);
    checkpoint::write(
        dir,
        &Checkpoint {
            step: done,
            config,
            params: engine.params()?,
            opt: engine.optimizer_state()?,
            device: ctl.device.clone(),
        },
    )
}

/// Trains `engine` as `cfg` says, from `ctl.start_step`, writing checkpoints
/// into `ctl.checkpoints` (which needs a [`FlatEngine`]).
pub fn train(
    engine: &mut Engine,
    cfg: &TrainConfig,
    progress: &mut dyn Progress,
    ctl: &Control,
) -> Result<TrainOutcome> {
    if ctl.checkpoints.is_some() && engine.flat().is_none() {
        return Err(no_checkpoints("the general engine runs this job"));
    }
    let mut plan = BatchPlan::new(cfg);
    let mut curve = Vec::new();
    let mut first_step_seconds = 0.0;
    let mut reached_target = false;
    let mut steps_done = ctl.start_step;
    // Skipped steps in a row (f16 loss scaling); a skip excuses a non-finite
    // loss for its own step only, and a long run of them is divergence.
    let mut skips_in_a_row = 0;
    // Early stopping: the best validation loss and log points since it.
    let (mut best_val, mut since_best) = (f64::INFINITY, 0usize);
    ready(engine.step())?;
    let start = Instant::now();
    for step in ctl.start_step..cfg.steps {
        let e = engine.step();
        let batches: Vec<_> = (0..plan.accumulate())
            .map(|k| plan.batch(step, k))
            .collect();
        let count: usize = batches.iter().map(|b| b.len()).sum();
        let skipped_before = e.skipped_steps();
        for b in &batches {
            e.accumulate(b, count)?;
        }
        e.apply(lr_at(cfg.schedule, cfg.lr, step, cfg.steps))?;
        steps_done = step + 1;
        if step == ctl.start_step && !cfg.run.untimed_first_step {
            e.sync()?;
            first_step_seconds = start.elapsed().as_secs_f64();
        }
        let skipped = e.skipped_steps() > skipped_before;
        skips_in_a_row = if skipped { skips_in_a_row + 1 } else { 0 };
        // NaN/Inf guard: every step where reading the loss is free (CPU),
        // else at each log point and before each checkpoint.
        if (e.loss_is_free() && !skipped) || skips_in_a_row > MAX_SKIPS_IN_A_ROW {
            let l = e.last_loss()?;
            if !l.is_finite() || skips_in_a_row > MAX_SKIPS_IN_A_ROW {
                return Err(FerroError::Diverged {
                    step,
                    value: l as f32,
                });
            }
        }
        if let (Some(dir), Some(flat)) = (&ctl.checkpoints, engine.flat()) {
            let due = cfg
                .run
                .checkpoint_every
                .is_some_and(|k| steps_done.is_multiple_of(k) && steps_done < cfg.steps);
            if crate::interrupt::requested() {
                let path = save_checkpoint(flat, cfg, ctl, dir, steps_done)?;
                return Err(FerroError::Interrupted {
                    step: steps_done,
                    saved: path.display().to_string(),
                });
            }
            if due {
                save_checkpoint(flat, cfg, ctl, dir, steps_done)?;
            }
        }
        let e = engine.step();
        let last = step + 1 == cfg.steps;
        let mut loss = None;
        if last || (step + 1).is_multiple_of(cfg.run.log_every) {
            let l = e.last_loss()?;
            if !l.is_finite() && !skipped {
                return Err(FerroError::Diverged {
                    step,
                    value: l as f32,
                });
            }
            let seconds = start.elapsed().as_secs_f64();
            let val_loss = match &ctl.validation {
                Some(v) => {
                    let p = e.params()?;
                    Some(reference::loss_and_grad(&p, v, cfg.model.activation, cfg.loss).0)
                }
                None => None,
            };
            curve.push(LossPoint {
                val_loss,
                step,
                loss: l,
                seconds,
            });
            loss = Some(l);
            if let Some(v) = val_loss {
                if v < best_val {
                    (best_val, since_best) = (v, 0);
                } else {
                    since_best += 1;
                }
            }
            if cfg.run.patience.is_some_and(|k| since_best >= k) {
                progress.update(step, loss);
                break;
            }
            let out_of_time = cfg
                .run
                .max_seconds
                .is_some_and(|m| start.elapsed().as_secs_f64() > m);
            if cfg.run.target_loss.is_some_and(|t| l <= t) || out_of_time {
                reached_target = !out_of_time || cfg.run.target_loss.is_some_and(|t| l <= t);
                progress.update(step, loss);
                break;
            }
        }
        progress.update(step, loss);
        if progress.stop() {
            break;
        }
    }
    let e = engine.step();
    e.sync()?;
    let train_seconds = start.elapsed().as_secs_f64();
    let final_loss = curve.last().map(|p| p.loss).unwrap_or(f64::NAN);
    Ok(TrainOutcome {
        steps: steps_done,
        final_loss,
        train_seconds,
        steps_per_second: steps_done as f64 / train_seconds.max(1e-12),
        first_step_seconds,
        curve,
        reached_target,
        skipped_steps: e.skipped_steps(),
    })
}

/// The error for checkpoints asked of an engine without flat state.
pub fn no_checkpoints(why: &str) -> FerroError {
    FerroError::OutsideEnvelope {
        reason: format!(
            "checkpoints (--checkpoint-every, --resume) need the fused engine's optimizer state, and {why}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Params;

    /// An engine that plays back a loss and a loss-scaling skip per step.
    struct Scripted {
        steps: Vec<(f64, bool)>,
        at: usize,
        skipped: usize,
    }

    impl StepEngine for Scripted {
        fn accumulate(&mut self, _: &crate::batches::Batch, _: usize) -> Result<()> {
            Ok(())
        }
        fn apply(&mut self, _: f64) -> Result<()> {
            self.skipped += self.steps[self.at].1 as usize;
            self.at += 1;
            Ok(())
        }
        fn last_loss(&mut self) -> Result<f64> {
            Ok(self.steps[self.at - 1].0)
        }
        fn sync(&mut self) -> Result<()> {
            Ok(())
        }
        fn params(&mut self) -> Result<Params> {
            Ok(Params { layers: vec![] })
        }
        fn gradient(&mut self, _: &crate::batches::Batch) -> Result<Vec<f32>> {
            Ok(vec![])
        }
        fn skipped_steps(&self) -> usize {
            self.skipped
        }
        fn loss_is_free(&self) -> bool {
            true
        }
    }

    fn run(steps: Vec<(f64, bool)>) -> Result<TrainOutcome> {
        let cfg = TrainConfig {
            n: 16,
            steps: steps.len(),
            ..TrainConfig::default()
        };
        let mut e = Engine::General(Box::new(Scripted {
            steps,
            at: 0,
            skipped: 0,
        }));
        train(&mut e, &cfg, &mut (), &Control::default())
    }

    #[test]
    fn the_nan_guard_survives_loss_scaling_skips() {
        // A skipped step's overflow is excused; the guard stays on after it
        // (it switched off for the rest of the run before).
        let mut steps = vec![(f64::INFINITY, true)];
        steps.extend([(1.0, false); 5]);
        assert_eq!(run(steps.clone()).unwrap().skipped_steps, 1);
        steps.push((f64::NAN, false));
        steps.extend([(1.0, false); 3]);
        match run(steps) {
            Err(FerroError::Diverged { step: 6, .. }) => {}
            other => panic!("{:?}", other.map(|o| o.final_loss)),
        }
        // Skips without end are divergence too.
        let steps = vec![(f64::INFINITY, true); MAX_SKIPS_IN_A_ROW + 5];
        assert!(matches!(run(steps), Err(FerroError::Diverged { .. })));
    }
}
