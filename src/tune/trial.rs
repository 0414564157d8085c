//! Running candidates for [`super::tune`]: each gets an untimed warm-up
//! (its kernels compile off the clock), then timed runs cut off once they can
//! no longer beat the best so far.

use super::candidates::Candidate;
use super::{Runner, Settings, Trial};
use crate::config::TrainConfig;
use crate::error::FerroError;

/// The search so far.
pub(super) struct Search {
    pub(super) best: Option<f64>,
    pub(super) trials: Vec<Trial>,
    pub(super) untried: usize,
}

impl Search {
    /// Tries each new candidate while budget is left.
    pub(super) fn run_all(
        &mut self,
        runner: &mut dyn Runner,
        job: &TrainConfig,
        own: &Candidate,
        list: Vec<Candidate>,
        s: &Settings,
        spent: &mut dyn FnMut() -> f64,
    ) {
        for c in list {
            if &c == own || self.trials.iter().any(|t| t.candidate == c) {
                continue;
            }
            if spent() >= s.budget {
                self.untried += 1;
                continue;
            }
            let t = trial(runner, job, &c, self.best, s.repeats);
            if t.reached && self.best.is_none_or(|b| t.seconds < b) {
                self.best = Some(t.seconds);
            }
            self.trials.push(t);
        }
    }
}

/// Steps of a candidate's untimed warm-up run.
const WARM_STEPS: usize = 2;

/// Runs one candidate: a short warm-up off the clock, then once with a
/// cut-off at twice the best time, and again while it stays within 1.5× the
/// best; keeps the fastest run.
pub(super) fn trial(
    runner: &mut dyn Runner,
    job: &TrainConfig,
    c: &Candidate,
    best: Option<f64>,
    repeats: usize,
) -> Trial {
    let mut t = Trial {
        candidate: c.clone(),
        label: c.label(),
        seconds: f64::NAN,
        runs: 0,
        reached: false,
        steps: 0,
        final_loss: f64::NAN,
        note: None,
    };
    // Off the clock: a few steps compile this candidate's kernels (another
    // lane count or launch scheme is another kernel; on the H200 NVRTC took
    // ~0.3 s, forty times the run) so the timed runs measure training only.
    // A failure here shows again, and is recorded, in the timed run.
    let mut warm = c.apply(job);
    warm.steps = job.steps.min(WARM_STEPS);
    warm.run.target_loss = None;
    warm.run.max_seconds = None;
    warm.run.log_every = warm.steps;
    let _ = runner.run(c.engine, &warm);
    for k in 0..repeats.max(1) {
        let cap = best.map(|b| if k == 0 { 2.0 * b } else { b });
        let mut cfg = c.apply(job);
        cfg.run.max_seconds = cap;
        let o = match runner.run(c.engine, &cfg) {
            Ok(o) => o,
            Err(e) => {
                t.note = Some(match e {
                    FerroError::Diverged { .. } => "diverged".into(),
                    other => other.to_string(),
                });
                break;
            }
        };
        t.runs += 1;
        let better = t.seconds.is_nan() || (o.reached_target && o.train_seconds < t.seconds);
        if better {
            t.seconds = o.train_seconds;
            t.steps = o.steps;
            t.final_loss = o.final_loss;
            t.reached = o.reached_target;
        }
        if !o.reached_target {
            t.note = Some(if cap.is_some_and(|m| o.train_seconds >= m) {
                "cut off: slower than the best so far".into()
            } else {
                format!("did not reach the target in {} steps", job.steps)
            });
            break;
        }
        t.note = None;
        if best.is_some_and(|b| o.train_seconds > 1.5 * b) {
            break;
        }
    }
    t
}
