//! `ferrofit tune`: the configuration with the shortest time to the target
//! loss for one job on one device. The job's own configuration runs first and
//! sets the target (its final loss, unless `--target-loss` is given) and the
//! time to beat; every later trial is cut off once it can no longer win. The
//! search only sees a [`Runner`], so tests drive it with a mock clock.

pub mod cache;
pub mod candidates;
mod trial;

use crate::config::{EngineKind, TrainConfig};
use crate::engine::run::TrainOutcome;
use crate::error::{FerroError, Result};
use candidates::{Candidate, Space};
use serde::Serialize;
use trial::{trial, Search};

/// Runs one configuration once (the real one trains on a device).
pub trait Runner {
    /// Trains `cfg` once on `engine` and says how it went.
    fn run(&mut self, engine: EngineKind, cfg: &TrainConfig) -> Result<TrainOutcome>;
}

impl<F: FnMut(EngineKind, &TrainConfig) -> Result<TrainOutcome>> Runner for F {
    fn run(&mut self, engine: EngineKind, cfg: &TrainConfig) -> Result<TrainOutcome> {
        self(engine, cfg)
    }
}

/// One configuration's result: its fastest run.
#[derive(Clone, Debug, Serialize)]
pub struct Trial {
    /// The configuration tried.
    pub candidate: Candidate,
    /// Its label in the report.
    pub label: String,
    /// Seconds of the fastest run: to the target, or until it was cut off.
    pub seconds: f64,
    /// Timed runs.
    pub runs: usize,
    /// Whether every run reached the target loss.
    pub reached: bool,
    /// Steps the fastest run took.
    pub steps: usize,
    /// Final loss (median over the runs).
    pub final_loss: f64,
    /// Why it stopped short: cut off (could not win any more), diverged, failed.
    pub note: Option<String>,
}

/// How the search spends its budget.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Seconds of search in all (checked before each trial).
    pub budget: f64,
    /// A trial may take this many times the job's steps (smaller batches need more).
    pub step_factor: usize,
    /// Steps between loss checks against the target.
    pub check_every: usize,
    /// Runs of a trial that is close to the best (its minimum is kept).
    pub repeats: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            budget: 60.0,
            step_factor: 4,
            check_every: 5,
            repeats: 2,
        }
    }
}

/// Everything a search found.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The loss every trial had to reach.
    pub target_loss: f64,
    /// The job as given (the time to beat).
    pub baseline: Trial,
    /// Every trial, in the order run.
    pub trials: Vec<Trial>,
    /// Candidates left untried when the budget ran out.
    pub untried: usize,
}

impl Report {
    /// The fastest trial that reached the target (the baseline included).
    pub fn winner(&self) -> Option<&Trial> {
        std::iter::once(&self.baseline)
            .chain(&self.trials)
            .filter(|t| t.reached)
            .min_by(|a, b| a.seconds.total_cmp(&b.seconds))
    }

    /// Reached trials, fastest first, then the rest in the order tried.
    pub fn ranked(&self) -> Vec<&Trial> {
        let mut v: Vec<&Trial> = std::iter::once(&self.baseline)
            .chain(&self.trials)
            .collect();
        v.sort_by(|a, b| {
            b.reached.cmp(&a.reached).then(if a.reached && b.reached {
                a.seconds.total_cmp(&b.seconds)
            } else {
                std::cmp::Ordering::Equal
            })
        });
        v
    }
}

/// Searches `space` for the fastest configuration of `base`; `spent()` says
/// how many seconds of budget are used so far.
pub fn tune(
    runner: &mut dyn Runner,
    base: &TrainConfig,
    space: Space,
    s: &Settings,
    spent: &mut dyn FnMut() -> f64,
) -> Result<Report> {
    let base_engine = if space.fused {
        EngineKind::Fused
    } else {
        EngineKind::General
    };
    // Warm-up (kernels compiled, caches filled) and the target, from the job as given.
    let warm = runner.run(
        base_engine,
        &TrainConfig {
            run: crate::config::RunControl {
                log_every: base.steps,
                target_loss: None,
                ..base.run.clone()
            },
            ..base.clone()
        },
    )?;
    let target_loss = base.run.target_loss.unwrap_or(warm.final_loss);
    if !target_loss.is_finite() {
        return Err(FerroError::Diverged {
            step: warm.steps,
            value: target_loss as f32,
        });
    }
    let job = TrainConfig {
        steps: base.steps * s.step_factor,
        run: crate::config::RunControl {
            target_loss: Some(target_loss),
            log_every: s.check_every,
            ..base.run.clone()
        },
        ..base.clone()
    };
    let own = Candidate::of(base, base_engine);
    let baseline = trial(runner, &job, &own, None, s.repeats);
    let mut state = Search {
        best: baseline.reached.then_some(baseline.seconds),
        trials: Vec::new(),
        untried: 0,
    };
    state.run_all(
        runner,
        &job,
        &own,
        candidates::first_stage(base, space),
        s,
        spent,
    );
    // Stage two: the GPU tile, launch scheme and lanes of the best fused
    // configuration (for the tiled kernel: its threads a workgroup).
    let fused_best = std::iter::once(&baseline)
        .chain(&state.trials)
        .filter(|t| t.reached && t.candidate.engine == EngineKind::Fused)
        .min_by(|a, b| a.seconds.total_cmp(&b.seconds))
        .map(|t| t.candidate.clone());
    if let Some(fb) = fused_best {
        state.run_all(
            runner,
            &job,
            &own,
            candidates::tiles_of(&fb, space, &base.model),
            s,
            spent,
        );
    }
    let Search {
        trials, untried, ..
    } = state;
    Ok(Report {
        target_loss,
        baseline,
        trials,
        untried,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Precision;
    use crate::engine::run::LossPoint;

    /// A device with a known optimum. Steps needed fall with the learning
    /// rate and rise as batches shrink; a step costs a launch plus a cost per
    /// point; lr above 1.5× the job's diverges; GPU tile 8 is fastest, and 4
    /// lanes per point are faster than the default. The first run of each
    /// kernel (engine, precision, launch scheme, lanes) pays a second of
    /// compilation, as NVRTC does.
    fn mock(
        clock: std::rc::Rc<std::cell::Cell<f64>>,
    ) -> impl FnMut(EngineKind, &TrainConfig) -> Result<TrainOutcome> {
        let mut compiled = std::collections::HashSet::new();
        move |engine, cfg| {
            let kernel = format!(
                "{engine:?} {:?} {} {:?}",
                cfg.precision, cfg.kernel.persistent, cfg.kernel.lanes
            );
            let compile = if compiled.insert(kernel) { 1.0 } else { 0.0 };
            let base = TrainConfig::default();
            let lrf = cfg.lr / base.lr;
            if lrf > 1.5 {
                return Err(FerroError::Diverged {
                    step: 3,
                    value: f32::NAN,
                });
            }
            let b = cfg.micro_batch() as f64;
            let n = cfg.n as f64;
            let need = (100.0 / lrf * (1.0 + (n / (b * cfg.accumulate as f64)) / 32.0)).ceil();
            let (per_point, launch) = match (engine, cfg.precision) {
                (EngineKind::Fused, _) => (1e-8, 1e-4),
                (_, Precision::F32) => (1e-7, 1e-3),
                _ => (0.8e-7, 1e-3),
            };
            // Two launches per step cost twice the launch overhead of one
            // persistent launch.
            let launch = if cfg.kernel.persistent {
                launch
            } else {
                2.0 * launch
            };
            let tile = cfg
                .kernel
                .points_per_unit
                .map_or(1.2, |p| 1.0 + (p as f64 / 8.0).log2().abs() * 0.1);
            let lanes = if cfg.kernel.lanes == Some(4) {
                0.8
            } else {
                1.0
            };
            let per_step = (b * per_point + launch) * cfg.accumulate as f64 * tile * lanes;
            let target_steps = if cfg.run.target_loss.is_some() {
                need as usize
            } else {
                cfg.steps
            };
            let mut steps = target_steps.min(cfg.steps);
            let mut reached = cfg.run.target_loss.is_some() && steps == target_steps;
            if let Some(m) = cfg.run.max_seconds {
                if compile + steps as f64 * per_step > m {
                    steps = ((m - compile).max(0.0) / per_step).ceil() as usize;
                    reached = false;
                }
            }
            let secs = compile + steps as f64 * per_step;
            clock.set(clock.get() + secs);
            Ok(TrainOutcome {
                steps,
                final_loss: if reached { 0.01 } else { 0.02 },
                train_seconds: secs,
                steps_per_second: 1.0 / per_step,
                first_step_seconds: per_step,
                curve: vec![LossPoint {
                    val_loss: None,
                    step: steps,
                    loss: 0.01,
                    seconds: secs,
                }],
                reached_target: reached,
                skipped_steps: 0,
            })
        }
    }

    fn search(space: Space, budget: f64) -> Report {
        search_job(&TrainConfig::default(), space, budget)
    }

    fn search_job(job: &TrainConfig, space: Space, budget: f64) -> Report {
        let clock = std::rc::Rc::new(std::cell::Cell::new(0.0));
        let mut runner = mock(clock.clone());
        let s = Settings {
            budget,
            ..Settings::default()
        };
        tune(&mut runner, job, space, &s, &mut || clock.get()).unwrap()
    }

    #[test]
    fn finds_the_known_optimum_deterministically() {
        let space = Space {
            fused: true,
            gpu: true,
            tensor: false,
        };
        let r = search(space, 1e9);
        let w = r.winner().unwrap();
        assert_eq!(w.candidate.engine, EngineKind::Fused);
        assert_eq!(w.candidate.batch_size, Some(1_000_000 / 64));
        assert_eq!(w.candidate.lr, TrainConfig::default().lr);
        assert_eq!(w.candidate.points_per_unit, Some(8));
        assert!(w.candidate.persistent);
        assert!(r.trials.iter().any(|t| !t.candidate.persistent));
        assert!(
            w.seconds < r.baseline.seconds / 5.0,
            "{} vs {}",
            w.seconds,
            r.baseline.seconds
        );
        // Same search, same answer.
        assert_eq!(search(space, 1e9).winner().unwrap().candidate, w.candidate);
        assert_eq!(r.untried, 0);
    }

    #[test]
    fn hopeless_trials_are_cut_off_and_diverging_ones_named() {
        let r = search(
            Space {
                fused: true,
                gpu: false,
                tensor: false,
            },
            1e9,
        );
        let best = r.winner().unwrap().seconds;
        let general = r
            .trials
            .iter()
            .filter(|t| t.candidate.engine == EngineKind::General);
        for t in general {
            assert!(!t.reached, "{}", t.label);
            assert!(t.note.is_some(), "{}", t.label);
        }
        assert!(r
            .trials
            .iter()
            .any(|t| t.note.as_deref() == Some("diverged")));
        // A cut-off trial never ran past twice the best time at that point.
        let cut = r
            .trials
            .iter()
            .filter(|t| t.note.as_deref().is_some_and(|n| n.starts_with("cut off")));
        for t in cut {
            assert!(t.seconds <= 2.0 * r.baseline.seconds + 1e-9, "{}", t.label);
        }
        assert!(
            r.trials
                .iter()
                .all(|t| t.candidate.points_per_unit.is_none()),
            "no tiles on a CPU"
        );
        assert!(best > 0.0);
    }

    #[test]
    fn a_spent_budget_leaves_candidates_untried() {
        let r = search(
            Space {
                fused: true,
                gpu: true,
                tensor: false,
            },
            0.0,
        );
        assert!(r.trials.is_empty() && r.untried > 10);
        assert_eq!(r.winner().unwrap().label, r.baseline.label);
    }

    #[test]
    fn kernel_compilation_is_off_the_clock() {
        // A wide layer: 4 lanes per point is the fastest kernel, but compiling
        // it takes far longer than the run; only an untimed warm-up lets it win.
        let mut job = TrainConfig::default();
        job.model.hidden = 64;
        let gpu = Space {
            fused: true,
            gpu: true,
            tensor: false,
        };
        let r = search_job(&job, gpu, 1e9);
        let best = r.winner().expect("a configuration reached the target");
        assert_eq!(best.candidate.lanes, Some(4), "{}", best.label);
        // Every timed run is the training alone: none paid the second of compilation.
        assert!(r
            .trials
            .iter()
            .all(|t| t.seconds.is_nan() || t.seconds < 1.0));
    }
}
