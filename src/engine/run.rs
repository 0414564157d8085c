//! The training loop shared by every engine: schedule, accumulation, logging,
//! early stop on a target loss, and timing between device synchronisations.

use super::StepEngine;
use crate::batches::BatchPlan;
use crate::config::TrainConfig;
use crate::error::{FerroError, Result};
use crate::schedule::lr_at;
use serde::Serialize;
use std::time::Instant;

/// A point on the loss curve.
#[derive(Clone, Debug, Serialize)]
pub struct LossPoint {
    pub step: usize,
    pub loss: f64,
    /// Seconds since training started.
    pub seconds: f64,
}

/// What a training run produced.
#[derive(Clone, Debug, Serialize)]
pub struct TrainOutcome {
    pub steps: usize,
    pub final_loss: f64,
    pub train_seconds: f64,
    pub steps_per_second: f64,
    /// Time of the first step alone (kernel compilation, autotune, allocation).
    pub first_step_seconds: f64,
    pub curve: Vec<LossPoint>,
    pub reached_target: bool,
    pub skipped_steps: usize,
}

/// Something that wants to hear about progress (a progress bar, a log).
pub trait Progress {
    fn update(&mut self, step: usize, loss: Option<f64>);
}

impl Progress for () {
    fn update(&mut self, _: usize, _: Option<f64>) {}
}

/// Trains `engine` as `cfg` says.
pub fn train(
    engine: &mut dyn StepEngine,
    cfg: &TrainConfig,
    progress: &mut dyn Progress,
) -> Result<TrainOutcome> {
    let mut plan = BatchPlan::new(cfg);
    let mut curve = Vec::new();
    let mut first_step_seconds = 0.0;
    let mut reached_target = false;
    let mut steps_done = 0;
    let start = Instant::now();
    for step in 0..cfg.steps {
        let batches: Vec<_> = (0..plan.accumulate())
            .map(|k| plan.batch(step, k))
            .collect();
        let count: usize = batches.iter().map(|b| b.len()).sum();
        for b in &batches {
            engine.accumulate(b, count)?;
        }
        engine.apply(lr_at(cfg.schedule, cfg.lr, step, cfg.steps))?;
        steps_done = step + 1;
        if step == 0 {
            engine.sync()?;
            first_step_seconds = start.elapsed().as_secs_f64();
        }
        let last = step + 1 == cfg.steps;
        let mut loss = None;
        if last || (step + 1).is_multiple_of(cfg.log_every) {
            let l = engine.last_loss()?;
            if !l.is_finite() && engine.skipped_steps() == 0 {
                return Err(FerroError::Diverged {
                    step,
                    value: l as f32,
                });
            }
            curve.push(LossPoint {
                step,
                loss: l,
                seconds: start.elapsed().as_secs_f64(),
            });
            loss = Some(l);
            let out_of_time = cfg
                .max_seconds
                .is_some_and(|m| start.elapsed().as_secs_f64() > m);
            if cfg.target_loss.is_some_and(|t| l <= t) || out_of_time {
                reached_target = !out_of_time || cfg.target_loss.is_some_and(|t| l <= t);
                progress.update(step, loss);
                break;
            }
        }
        progress.update(step, loss);
    }
    engine.sync()?;
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
        skipped_steps: engine.skipped_steps(),
    })
}
