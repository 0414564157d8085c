//! The persistent fused GPU kernel (many full-batch steps per launch) against
//! the two-launch path it replaces, on every GPU of the run (lavapipe in CI).

mod common;

use common::train_from;
use ferrofit::backend::select::Target;
use ferrofit::config::{Activation, EngineKind, OptimizerKind, Schedule, TrainConfig};
use ferrofit::model::Params;
use ferrofit::task::Task;
use ferrofit::trainer::RunResult;

fn run(target: &Target, cfg: &TrainConfig) -> RunResult {
    let init = Params::init(&cfg.model, cfg.seed);
    let data = Task::X2Noise.generate(cfg.n, cfg.seed);
    train_from(target, cfg, EngineKind::Fused, init, Some(data))
        .unwrap_or_else(|e| panic!("{}: {e}", target.label()))
}

/// Largest difference between two weight sets, relative to the largest weight.
fn weight_gap(a: &Params, b: &Params) -> f32 {
    let (a, b) = (a.flatten(), b.flatten());
    let scale = b.iter().fold(1e-6f32, |m, v| m.max(v.abs()));
    a.iter()
        .zip(&b)
        .fold(0.0f32, |m, (x, y)| m.max((x - y).abs()))
        / scale
}

/// The GPUs of this run (lavapipe in CI; a required kind that is absent fails).
fn gpus() -> Vec<Target> {
    common::targets()
        .into_iter()
        .filter(|t| t.backend.is_gpu())
        .collect()
}

#[test]
fn persistent_steps_equal_two_launches_per_step_on_every_gpu() {
    for target in &gpus() {
        for (opt, act, hidden) in [
            (OptimizerKind::Sgd, Activation::Relu, 10),
            (OptimizerKind::Momentum, Activation::Tanh, 10),
            (OptimizerKind::Adam, Activation::Relu, 64),
            (OptimizerKind::Sgd, Activation::Gelu, 128),
            (OptimizerKind::Adamw, Activation::Silu, 24),
        ] {
            // Log points at 1 step (one launch per step), 7 (launch boundaries
            // mid-run) and the whole run (one launch for 59 steps).
            for log_every in [1, 7, 60] {
                let mut cfg = TrainConfig {
                    n: 5_003,
                    steps: 60,
                    optimizer: opt,
                    lr: if opt == OptimizerKind::Sgd { 0.2 } else { 0.02 },
                    weight_decay: 1e-3,
                    schedule: Schedule::Cosine,
                    run: ferrofit::config::RunControl {
                        log_every,
                        ..Default::default()
                    },
                    ..TrainConfig::default()
                };
                cfg.model.activation = act;
                cfg.model.hidden = hidden;
                let what = format!(
                    "{} {opt:?} {act:?} H={hidden} log_every={log_every}",
                    target.label()
                );
                let fast = run(target, &cfg);
                let note = fast.engine_note.clone().unwrap_or_default();
                assert!(
                    note.contains("persistent kernel"),
                    "{what}: the persistent kernel did not run ({note})"
                );
                let two = run(
                    target,
                    &TrainConfig {
                        kernel: ferrofit::config::KernelKnobs {
                            persistent: false,
                            ..cfg.kernel.clone()
                        },
                        ..cfg.clone()
                    },
                );
                assert!(two.engine_note.unwrap_or_default().contains("two launches"));
                assert_eq!(fast.outcome.curve.len(), two.outcome.curve.len(), "{what}");
                // The exchange's tag costs the gradient one mantissa bit, so the
                // two paths round differently, not more.
                for (a, b) in fast.outcome.curve.iter().zip(&two.outcome.curve) {
                    let rel = (a.loss - b.loss).abs() / b.loss;
                    assert!(
                        rel < 1e-4,
                        "{what} step {}: {} vs {}",
                        a.step,
                        a.loss,
                        b.loss
                    );
                }
                let gap = weight_gap(&fast.params, &two.params);
                assert!(gap < 1e-4, "{what}: weights differ by {gap} (relative)");
                if log_every == 1 {
                    let first = fast.outcome.curve[0].loss;
                    assert!(fast.outcome.final_loss < first, "{what}: no progress");
                }
            }
        }
    }
}

common::per_gpu! {
    fn steps_that_are_not_whole_batches_use_two_launches(target) {
        let cfg = TrainConfig {
            n: 4_096,
            steps: 5,
            batch_size: Some(1_000),
            ..TrainConfig::default()
        };
        let note = run(target, &cfg).engine_note.unwrap_or_default();
        // The scheme first, then the shader compiler.
        let scheme = note.split("; ").next();
        assert_eq!(scheme, Some("two launches per step"), "{}: {note}", target.label());
    }
}
