//! Training on every backend: every parameter tensor moves with an optimizer
//! created once, the loss falls, what is read back and saved is what was
//! trained, and the fused and general engines follow the same loss curve.

mod common;

use common::train_from;
use ferrofit::backend::select::Target;
use ferrofit::config::{Activation, EngineKind, OptimizerKind, Precision, Schedule, TrainConfig};
use ferrofit::model::Params;
use ferrofit::task::Task;
use ferrofit::trainer::RunResult;

fn small(optimizer: OptimizerKind, lr: f64) -> TrainConfig {
    TrainConfig {
        n: 4096,
        steps: 30,
        optimizer,
        lr,
        run: ferrofit::config::RunControl {
            log_every: 1,
            ..Default::default()
        },
        ..TrainConfig::default()
    }
}

fn assert_every_tensor_moved(before: &Params, after: &Params, what: &str) {
    for (i, (b, a)) in before.layers.iter().zip(&after.layers).enumerate() {
        assert_ne!(b.w, a.w, "{what}: layers.{i}.weight did not change");
        assert_ne!(b.b, a.b, "{what}: layers.{i}.bias did not change");
        assert!(
            a.w.iter().chain(&a.b).all(|v| v.is_finite()),
            "{what}: layers.{i} not finite"
        );
    }
}

common::per_device! {
    fn every_parameter_moves_and_loss_falls_on_every_backend_and_optimizer(target) {
        let opts = [
            (OptimizerKind::Sgd, 0.2),
            (OptimizerKind::Momentum, 0.05),
            (OptimizerKind::Adam, 0.02),
            (OptimizerKind::Adamw, 0.02),
        ];
        for engine in [EngineKind::General, EngineKind::Auto] {
            for (opt, lr) in opts {
                let cfg = small(opt, lr);
                let init = Params::init(&cfg.model, cfg.seed);
                let data = Task::X2Noise.generate(cfg.n, cfg.seed);
                let what = format!("{} {engine:?} {opt:?}", target.label());
                let r = train_from(target, &cfg, engine, init.clone(), Some(data))
                    .expect(&what);
                assert_every_tensor_moved(&init, &r.params, &what);
                let first = r.outcome.curve.first().unwrap().loss;
                assert!(
                    r.outcome.final_loss < 0.8 * first,
                    "{what}: loss {first} -> {}",
                    r.outcome.final_loss
                );
            }
        }
    }
}

common::per_device! {
    fn weights_read_back_are_the_trained_ones_and_stay_so(target) {
        let cfg = small(OptimizerKind::Sgd, 0.2);
        let init = Params::init(&cfg.model, cfg.seed);
        let data = Task::X2Noise.generate(cfg.n, cfg.seed);
        let r = train_from(
            target,
            &cfg,
            EngineKind::General,
            init,
            Some(data.clone()))
        .unwrap();
        // The weights read back reproduce the recorded final loss (they are the trained ones) ...
        let (loss_after, _) = ferrofit::model::reference::loss_and_grad(
            &r.params,
            &data,
            cfg.model.activation,
            cfg.loss,
        );
        assert!(
            loss_after < r.outcome.curve[0].loss,
            "{}: read-back weights are not trained",
            target.label()
        );
        // ... and survive a save and a load unchanged.
        let path = std::env::temp_dir().join(format!(
            "ferrofit-rt-{}-{}.safetensors",
            target.label(),
            std::process::id()
        ));
        ferrofit::save::save(&r.params, &path, Default::default()).unwrap();
        assert_eq!(ferrofit::save::load(&path).unwrap(), r.params);
        std::fs::remove_file(path).unwrap();
    }
}

/// Loss curves agree point by point within `tol` (relative).
fn assert_same_curve(a: &RunResult, b: &RunResult, tol: f64, what: &str) {
    assert_eq!(
        a.outcome.curve.len(),
        b.outcome.curve.len(),
        "{what}: curve lengths"
    );
    for (x, y) in a.outcome.curve.iter().zip(&b.outcome.curve) {
        let rel = (x.loss - y.loss).abs() / y.loss;
        assert!(
            rel < tol,
            "{what} step {}: {} vs {}",
            x.step,
            x.loss,
            y.loss
        );
    }
}

common::per_device! {
    fn fused_and_general_engines_agree_over_100_steps(target) {
        for opt in [
            OptimizerKind::Sgd,
            OptimizerKind::Momentum,
            OptimizerKind::Adamw,
        ] {
            let lr = if opt == OptimizerKind::Sgd { 0.2 } else { 0.02 };
            let cfg = TrainConfig {
                n: 20_000,
                steps: 100,
                optimizer: opt,
                lr,
                weight_decay: 1e-3,
                run: ferrofit::config::RunControl {
                    log_every: 1,
                    ..Default::default()
                },
                ..TrainConfig::default()
            };
            agree_over_100_steps(target, cfg);
        }
    }

    fn fused_and_general_engines_agree_on_a_deep_model(target) {
        agree_over_100_steps(target, deep());
    }
}

/// Three hidden layers: the GPU takes the tiled kernel.
fn deep() -> TrainConfig {
    let mut cfg = TrainConfig {
        n: 5_000,
        steps: 100,
        // Momentum, not Adam: Adam's normalisation amplified Burn's CUDA summation
        // order past 3e-3 by step 74 on this model (measured on an H200).
        optimizer: OptimizerKind::Momentum,
        lr: 0.05,
        run: ferrofit::config::RunControl {
            log_every: 1,
            ..Default::default()
        },
        ..TrainConfig::default()
    };
    cfg.model.hidden = 16;
    cfg.model.layers = 3;
    cfg.model.activation = Activation::Tanh;
    cfg
}

/// `target`'s fused and general engines follow the CPU fused engine's curve.
fn agree_over_100_steps(target: &Target, cfg: TrainConfig) {
    let cpu = &common::cpu();
    let init = Params::init(&cfg.model, cfg.seed);
    let data = Task::X2Noise.generate(cfg.n, cfg.seed);
    let reference = train_from(
        cpu,
        &cfg,
        EngineKind::Fused,
        init.clone(),
        Some(data.clone()),
    )
    .unwrap();
    for engine in [EngineKind::General, EngineKind::Fused] {
        let r = train_from(target, &cfg, engine, init.clone(), Some(data.clone())).unwrap();
        assert_eq!(r.engine, engine);
        // Burn's GPU kernels sum in another order than the fused engine, and
        // Adam's normalisation amplifies it: 1.05e-3 was measured on an H200
        // (CUDA, AdamW). Everything else agrees within 1e-3.
        let gpu_general = engine == EngineKind::General && target.backend.is_gpu();
        let tol = if gpu_general { 3e-3 } else { 1e-3 };
        let what = format!("{} {engine:?} {:?}", target.label(), cfg.optimizer);
        assert_same_curve(&r, &reference, tol, &what);
    }
}

/// Trains the seed task's data from the seeded initial weights: (init, result).
fn fit(target: &Target, cfg: &TrainConfig, engine: EngineKind) -> (Params, RunResult) {
    let init = Params::init(&cfg.model, cfg.seed);
    let data = Task::X2Noise.generate(cfg.n, cfg.seed);
    let r = train_from(target, cfg, engine, init.clone(), Some(data))
        .unwrap_or_else(|e| panic!("{} {engine:?}: {e}", target.label()));
    (init, r)
}

/// Adam for 40 steps on 4096 points, the base of the tests below.
fn adam40() -> TrainConfig {
    TrainConfig {
        n: 4096,
        steps: 40,
        optimizer: OptimizerKind::Adam,
        lr: 0.02,
        run: ferrofit::config::RunControl {
            log_every: 1,
            ..Default::default()
        },
        ..TrainConfig::default()
    }
}

common::per_device! {
    fn mini_batches_accumulation_and_schedules_train_on_every_backend(target) {
        let cfg = TrainConfig {
            batch_size: Some(512),
            accumulate: 2,
            schedule: Schedule::Cosine,
            ..adam40()
        };
        for engine in [EngineKind::Fused, EngineKind::General] {
            let (_, r) = fit(target, &cfg, engine);
            let (first, last) = (r.outcome.curve[0].loss, r.outcome.final_loss);
            assert!(
                last < 0.5 * first,
                "{} {engine:?}: {first} -> {last}",
                target.label()
            );
        }
    }
}

#[test]
fn accumulating_the_full_batch_equals_one_full_batch() {
    let target = &common::cpu();
    let base = TrainConfig {
        n: 3000,
        steps: 10,
        run: ferrofit::config::RunControl {
            log_every: 1,
            ..Default::default()
        },
        ..TrainConfig::default()
    };
    let (_, a) = fit(target, &base, EngineKind::Fused);
    let (_, b) = fit(
        target,
        &TrainConfig {
            accumulate: 3,
            ..base
        },
        EngineKind::Fused,
    );
    assert!((a.outcome.final_loss - b.outcome.final_loss).abs() < 1e-6 * a.outcome.final_loss);
}

#[test]
fn reduced_precision_with_master_weights_trains() {
    let target = &common::cpu();
    for precision in [Precision::Bf16, Precision::F16] {
        let (init, r) = fit(
            target,
            &TrainConfig {
                precision,
                ..adam40()
            },
            EngineKind::Auto,
        );
        assert_eq!(
            r.engine,
            EngineKind::General,
            "reduced precision runs on the general engine"
        );
        assert_every_tensor_moved(&init, &r.params, &format!("{precision:?}"));
        let (first, last) = (r.outcome.curve[0].loss, r.outcome.final_loss);
        assert!(last < 0.5 * first, "{precision:?}: {first} -> {last}");
    }
}

common::per_device! {
    fn a_kept_engine_reruns_the_first_run(target) {
        // Adam (state that must be reset), full batch (the persistent kernel
        // on a GPU) and mini-batches (two launches a step).
        for batch_size in [None, Some(1000)] {
            let cfg = TrainConfig {
                batch_size,
                ..small(OptimizerKind::Adam, 0.02)
            };
            let fresh = ferrofit::trainer::Trainer::new(cfg.clone(), target.clone())
                .engine(EngineKind::Fused)
                .run()
                .unwrap()
                .outcome;
            let mut reruns =
                ferrofit::trainer::reruns::Reruns::new(&cfg, target.clone(), EngineKind::Fused)
                    .unwrap();
            // Exact on the CPU; a GPU's reductions may add in another order.
            let tol = if target.label() == "cpu" { 0.0 } else { 1e-5 };
            for i in 0..3 {
                let o = reruns.run(&cfg).unwrap();
                assert_eq!(o.curve.len(), fresh.curve.len());
                for (a, b) in o.curve.iter().zip(&fresh.curve) {
                    assert!(
                        (a.loss - b.loss).abs() <= tol * b.loss,
                        "{} batch {batch_size:?}, run {i}, step {}: {} vs a fresh engine's {}",
                        target.label(),
                        a.step,
                        a.loss,
                        b.loss
                    );
                }
            }
        }
    }
}
