//! Measuring one row: a warm-up run, R timed runs (the loss read back only at
//! the end, so no per-step host round trip), and one run that waits for the
//! device after every step to expose per-step latency (jitter).

use super::stats::Summary;
use super::BenchRow;
use crate::config::TrainConfig;
use crate::engine::run::TrainOutcome;
use crate::error::Result;

/// Something that runs the job once; the real one trains on a device, tests use a mock.
pub trait Trainer {
    fn run(&mut self, cfg: &TrainConfig) -> Result<TrainOutcome>;
}

impl<F: FnMut(&TrainConfig) -> Result<TrainOutcome>> Trainer for F {
    fn run(&mut self, cfg: &TrainConfig) -> Result<TrainOutcome> {
        self(cfg)
    }
}

/// Warms up, repeats `reps` times, then measures per-step latency.
pub fn measure(
    trainer: &mut dyn Trainer,
    cfg: &TrainConfig,
    reps: usize,
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
    let warm = trainer.run(&quiet)?;
    let mut samples = Vec::with_capacity(reps);
    let mut losses = Vec::with_capacity(reps);
    let mut steps_taken = Vec::with_capacity(reps);
    let mut reached = true;
    for _ in 0..reps {
        let o = trainer.run(&quiet)?;
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
    let steps: Vec<f64> = lat
        .curve
        .windows(2)
        .map(|w| w[1].seconds - w[0].seconds)
        .collect();
    let summary = Summary::of(&samples);
    losses.sort_by(|a, b| a.total_cmp(b));
    let final_loss = losses.get(losses.len() / 2).copied().unwrap_or(f64::NAN);
    Ok(BenchRow {
        name: name.into(),
        backend: backend.into(),
        device: device.into(),
        throughput: cfg.points_per_step() as f64 * warm.steps as f64 / summary.median,
        samples,
        summary,
        step_latency: (!steps.is_empty()).then(|| Summary::of(&steps)),
        step_seconds: steps.clone(),
        first_step_seconds: Some(warm.first_step_seconds),
        final_loss,
        reached_target: cfg.run.target_loss.is_some() && reached,
        steps: steps_taken.get(steps_taken.len() / 2).copied().unwrap_or(0),
        curve: lat.curve,
        relative: None,
        note: None,
    })
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
                            step: s,
                            loss: 1.0,
                            seconds: t,
                        }
                    })
                    .collect()
            } else {
                vec![LossPoint {
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
        let row = measure(&mut mock(), &cfg, 3, "ferrofit fused", "cpu", "test").unwrap();
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
    }
}
