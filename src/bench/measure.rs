//! Measuring one row: W warm-up runs, R timed runs (the loss read back only at
//! the end, so no per-step host round trip), and one run that waits for the
//! device after every step to expose per-step latency (jitter).

use super::stats::{fmt_time, outliers, percentile, Summary};
use super::BenchRow;
use crate::config::TrainConfig;
use crate::engine::run::TrainOutcome;
use crate::error::Result;

/// Something that runs the job once; the real one trains on a device, tests use a mock.
pub trait Trainer {
    /// Trains `cfg` once and says how it went.
    fn run(&mut self, cfg: &TrainConfig) -> Result<TrainOutcome>;
}

impl<F: FnMut(&TrainConfig) -> Result<TrainOutcome>> Trainer for F {
    fn run(&mut self, cfg: &TrainConfig) -> Result<TrainOutcome> {
        self(cfg)
    }
}

/// How many runs a row takes: `warmup` untimed (compilation, caches,
/// clocks), then `runs` timed.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Untimed runs first.
    pub warmup: usize,
    /// Timed runs.
    pub runs: usize,
}

/// Warms up, repeats `plan.runs` times, then measures per-step latency.
pub fn measure(
    trainer: &mut dyn Trainer,
    cfg: &TrainConfig,
    plan: Plan,
    name: &str,
    backend: &str,
    device: &str,
) -> Result<BenchRow> {
    // Timed runs read the loss back only at the end — unless they must watch for
    // the target loss, which they then check every `log_every` steps.
    let mut quiet = cfg.clone();
    if cfg.run.target_loss.is_none() {
        quiet.run.log_every = cfg.steps;
    }
    let mut first_step = None;
    for _ in 0..plan.warmup {
        let o = trainer.run(&quiet)?;
        first_step.get_or_insert(o.first_step_seconds);
    }
    // The timed runs' clock covers the steps alone: the first step's own
    // time (with its host round trip) comes from a warm-up run.
    let mut timed = quiet.clone();
    timed.run.untimed_first_step = plan.warmup > 0;
    let reps = plan.runs;
    let mut samples = Vec::with_capacity(reps);
    let mut losses = Vec::with_capacity(reps);
    let mut steps_taken = Vec::with_capacity(reps);
    let mut reached = true;
    for _ in 0..reps {
        let o = trainer.run(&timed)?;
        first_step.get_or_insert(o.first_step_seconds);
        samples.push(o.train_seconds);
        losses.push(o.final_loss);
        steps_taken.push(o.steps);
        reached &= o.reached_target;
    }
    steps_taken.sort_unstable();
    let every = TrainConfig {
        run: crate::config::RunControl {
            log_every: 1,
            ..cfg.run.clone()
        },
        ..cfg.clone()
    };
    let lat = trainer.run(&every)?;
    let step_times: Vec<f64> = lat
        .curve
        .windows(2)
        .map(|w| w[1].seconds - w[0].seconds)
        .collect();
    let summary = Summary::of(&samples);
    losses.sort_by(|a, b| a.total_cmp(b));
    let final_loss = losses.get(losses.len() / 2).copied().unwrap_or(f64::NAN);
    let steps = steps_taken.get(steps_taken.len() / 2).copied().unwrap_or(0);
    let warnings = doubts(&samples, &step_times);
    Ok(BenchRow {
        name: name.into(),
        backend: backend.into(),
        device: device.into(),
        throughput: cfg.points_per_step() as f64 * steps as f64 / summary.median,
        samples,
        summary,
        step_latency: (!step_times.is_empty()).then(|| Summary::of(&step_times)),
        step_seconds: step_times,
        first_step_seconds: first_step,
        final_loss,
        reached_target: cfg.run.target_loss.is_some() && reached,
        steps,
        curve: lat.curve,
        relative: None,
        note: None,
        warnings,
    })
}

/// Outliers among the timed runs and the step times, as hyperfine reports
/// them: a number the table's median hides, and what to do about it.
fn doubts(samples: &[f64], steps: &[f64]) -> Vec<String> {
    let cases = [
        (
            samples,
            "timed runs",
            "rerun on a quiet system, warm up longer (--warmup) or rest between rows (--cooldown)",
        ),
        (
            steps,
            "step times",
            "stalls of the device or the host between steps; the step CV counts them",
        ),
    ];
    cases
        .into_iter()
        .filter_map(|(xs, what, advice)| {
            let k = outliers(xs);
            (k > 0).then(|| {
                format!(
                    "{k} of {} {what} are statistical outliers (median {}, max {}): {advice}",
                    xs.len(),
                    fmt_time(percentile_of(xs, 0.5)),
                    fmt_time(xs.iter().copied().fold(f64::NAN, f64::max))
                )
            })
        })
        .collect()
}

fn percentile_of(xs: &[f64], q: f64) -> f64 {
    let mut s = xs.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    percentile(&s, q)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::run::LossPoint;

    /// A trainer whose clock is exact: run k takes k+1 seconds; steps take 10 ms, one 30 ms.
    fn mock() -> impl FnMut(&TrainConfig) -> Result<TrainOutcome> {
        let mut k = 0usize;
        move |cfg: &TrainConfig| {
            k += 1;
            let curve = if cfg.run.log_every == 1 {
                let mut t = 0.0;
                (0..cfg.steps)
                    .map(|s| {
                        t += if s == 5 { 0.03 } else { 0.01 };
                        LossPoint {
                            val_loss: None,
                            step: s,
                            loss: 1.0,
                            seconds: t,
                        }
                    })
                    .collect()
            } else {
                vec![LossPoint {
                    val_loss: None,
                    step: cfg.steps - 1,
                    loss: 0.5,
                    seconds: k as f64,
                }]
            };
            Ok(TrainOutcome {
                steps: cfg.steps,
                final_loss: 0.5,
                train_seconds: k as f64,
                steps_per_second: 0.0,
                first_step_seconds: 0.25,
                curve,
                reached_target: false,
                skipped_steps: 0,
            })
        }
    }

    #[test]
    fn warm_up_is_off_the_clock_and_statistics_are_exact() {
        let cfg = TrainConfig {
            n: 1000,
            steps: 11,
            ..TrainConfig::default()
        };
        let plan = Plan { warmup: 1, runs: 3 };
        let row = measure(&mut mock(), &cfg, plan, "ferrofit fused", "cpu", "test").unwrap();
        // Run 1 is the warm-up; the timed runs took 2, 3 and 4 s.
        assert_eq!(row.samples, vec![2.0, 3.0, 4.0]);
        assert_eq!(
            (row.summary.median, row.summary.min, row.summary.max),
            (3.0, 2.0, 4.0)
        );
        assert_eq!(row.first_step_seconds, Some(0.25));
        assert_eq!((row.steps, row.curve.len()), (11, 11));
        assert_eq!(row.throughput, 1000.0 * 11.0 / 3.0);
        let lat = row.step_latency.unwrap();
        assert_eq!(lat.runs, 10);
        assert!((lat.median - 0.01).abs() < 1e-12 && (lat.max - 0.03).abs() < 1e-12);
        // Three warm-up runs: the timed ones are runs 4, 5 and 6.
        let plan = Plan { warmup: 3, runs: 3 };
        let row = measure(&mut mock(), &cfg, plan, "ferrofit fused", "cpu", "test").unwrap();
        assert_eq!(row.samples, vec![4.0, 5.0, 6.0]);
        // The 30 ms step among 10 ms ones is an outlier, and said so.
        assert_eq!(row.warnings.len(), 1, "{:?}", row.warnings);
        assert!(
            row.warnings[0].starts_with("1 of 10 step times"),
            "{:?}",
            row.warnings
        );
    }
}
