//! Data parallelism: two replicas (two peers on the CPU, two on the wgpu
//! device in CI) train to the same loss and weights as one device, up to the
//! order in which partial gradients are summed.

mod common;

use ferrofit::config::{EngineKind, OptimizerKind, TrainConfig};
use ferrofit::model::Params;
use ferrofit::task::Task;
use ferrofit::trainer::Trainer;

fn max_rel(a: &Params, b: &Params) -> f64 {
    a.flatten()
        .iter()
        .zip(b.flatten())
        .map(|(x, y)| ((x - y).abs() / y.abs().max(1e-3)) as f64)
        .fold(0.0, f64::max)
}

common::per_device! {
    fn two_replicas_equal_one_device(t) {
        for (optimizer, batch_size, accumulate) in [
            (OptimizerKind::Sgd, None, 1),
            (OptimizerKind::Adam, Some(3001), 2),
        ] {
            let cfg = TrainConfig {
                n: 10_007,
                steps: 40,
                optimizer,
                lr: if optimizer == OptimizerKind::Sgd {
                    0.2
                } else {
                    0.02
                },
                batch_size,
                accumulate,
                run: ferrofit::config::RunControl {
                    log_every: 10,
                    ..Default::default()
                },
                ..TrainConfig::default()
            };
            let init = Params::init(&cfg.model, cfg.seed);
            let data = Task::X2Noise.generate(cfg.n, cfg.seed);
            let one =
                common::train_from(t, &cfg, EngineKind::Fused, init.clone(), Some(data.clone()))
                    .unwrap();
            let r = Trainer::replicas(cfg.clone(), vec![t.clone(), t.clone()])
                .init(init)
                .data(data)
                .run()
                .unwrap();
            let (two, params) = (r.outcome, r.params);
            let rel = (two.final_loss - one.outcome.final_loss).abs() / one.outcome.final_loss;
            assert!(
                rel < 1e-4,
                "{} {optimizer:?}: loss {} vs {}",
                t.label(),
                two.final_loss,
                one.outcome.final_loss
            );
            let w = max_rel(&params, &one.params);
            assert!(
                w < 1e-3,
                "{} {optimizer:?}: weights differ by {w:e}",
                t.label()
            );
            assert_eq!(two.steps, 40);
        }
    }
}

#[test]
fn a_data_parallel_run_checkpoints_and_resumes_to_the_same_weights() {
    use ferrofit::engine::checkpoint;
    let t = common::cpu();
    let cfg = TrainConfig {
        n: 5_003,
        steps: 20,
        optimizer: OptimizerKind::Adam,
        lr: 0.02,
        run: ferrofit::config::RunControl {
            log_every: 5,
            checkpoint_every: Some(10),
            ..Default::default()
        },
        ..TrainConfig::default()
    };
    let init = Params::init(&cfg.model, cfg.seed);
    let data = Task::X2Noise.generate(cfg.n, cfg.seed);
    let replicas = vec![t.clone(), t.clone()];
    let dir = std::env::temp_dir().join(format!("ferrofit-dp-ckpt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let r = Trainer::replicas(cfg.clone(), replicas.clone())
        .init(init)
        .data(data.clone())
        .checkpoints(dir.clone())
        .run()
        .unwrap();
    let (whole, params) = (r.outcome, r.params);
    assert_eq!(whole.steps, 20);
    // One checkpoint is due, at step 10 (none at the last step: the model is saved then).
    let (c, _) = checkpoint::latest(&dir).unwrap();
    assert_eq!(c.step, 10);
    let r = Trainer::replicas(c.config.clone(), replicas)
        .data(data)
        .checkpoints(dir.clone())
        .resume(c)
        .run()
        .unwrap();
    let (rest, resumed) = (r.outcome, r.params);
    assert_eq!(rest.steps, 20);
    assert_eq!(
        resumed.flatten(),
        params.flatten(),
        "resuming at step 10 must retrace the uninterrupted run"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
