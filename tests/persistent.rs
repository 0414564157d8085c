//! The persistent fused GPU kernel (many full-batch steps per launch) against
//! the two-launch path it replaces, on every GPU of the run (lavapipe in CI).

mod common;

use common::{ferrofit, train_from};
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

/// A resume runs on the persistent grid of the run it continues (so that its
/// sums take the same order), not on the one this device would choose.
#[test]
fn a_resume_keeps_the_persistent_grid_of_the_run_it_continues() {
    let name = "persistent::a_resume_keeps_the_persistent_grid_of_the_run_it_continues";
    if common::device(common::Kind::Wgpu, name).is_none() {
        return;
    }
    let dir = common::fresh_dir("persistent-grid");
    let out = dir.join("run");
    let o = out.to_str().unwrap();
    let engine = |stdout: &str, stderr: &str| {
        stdout
            .lines()
            .chain(stderr.lines())
            .find(|l| l.starts_with("engine:"))
            .unwrap_or_default()
            .to_string()
    };
    let workgroups = |line: &str| -> u32 {
        let n = line.split(" workgroup(s)").next();
        n.and_then(|s| s.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no workgroups in: {line}"))
    };
    let job = "train --backend wgpu --n 100000 --steps 40 --checkpoint-every 10 --out";
    let job: Vec<&str> = job.split(' ').collect();
    // The device's own choice is what the checkpoints record.
    let own = dir.join("own");
    let (code, stdout, stderr) = ferrofit(&[&job[..], &[own.to_str().unwrap()]].concat());
    assert_eq!(code, 0, "{stderr}");
    let chosen = workgroups(&engine(&stdout, &stderr));
    let folder = ferrofit::engine::checkpoint::folder(&own);
    let (saved, _) = ferrofit::engine::checkpoint::latest(&folder).unwrap();
    assert_eq!(saved.config.kernel.grid, Some(chosen));
    // A grid given is kept by the resume.
    let (code, stdout, stderr) = ferrofit(&[&job[..], &[o, "--grid", "1"]].concat());
    assert_eq!(code, 0, "{stderr}");
    let line = engine(&stdout, &stderr);
    assert!(line.contains("persistent kernel, 1 workgroup(s)"), "{line}");
    // Unfinished again: the resume continues from its newest checkpoint.
    std::fs::remove_file(out.join("run.json")).unwrap();
    let (code, stdout, stderr) = ferrofit(&["train", "--resume", o]);
    assert_eq!(code, 0, "{stderr}");
    let line = engine(&stdout, &stderr);
    assert!(line.contains("persistent kernel, 1 workgroup(s)"), "{line}");
    // Zero workgroups is refused, naming the flag.
    let (code, _, stderr) = ferrofit(&["train", "--backend", "wgpu", "--grid", "0"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("grid"), "{stderr}");
}
