//! Gradients of every engine on every backend equal the float64 reference.

mod common;

use ferrofit::backend::Backend;
use ferrofit::batches::Batch;
use ferrofit::config::{Activation, EngineKind, Loss, ModelSpec, TrainConfig};
use ferrofit::engine::fused::cpu::kernel as cpu_kernel;
use ferrofit::model::reference::relative_error as rel_err;
use ferrofit::model::{reference, Params};
use ferrofit::task::Dataset;

/// Models covering widths, depths, activations and losses; sizes not multiples of any tile.
fn cases() -> Vec<(ModelSpec, Loss, usize)> {
    let base = TrainConfig::default().model;
    vec![
        (base, Loss::Mse, 1000),
        (
            ModelSpec {
                hidden: 7,
                layers: 2,
                activation: Activation::Tanh,
                ..base
            },
            Loss::Huber,
            333,
        ),
        (
            ModelSpec {
                inputs: 3,
                hidden: 16,
                layers: 3,
                outputs: 2,
                activation: Activation::Gelu,
            },
            Loss::Mse,
            257,
        ),
        (
            ModelSpec {
                hidden: 33,
                activation: Activation::Silu,
                ..base
            },
            Loss::L1,
            129,
        ),
        (
            ModelSpec {
                inputs: 2,
                hidden: 5,
                activation: Activation::Sigmoid,
                ..base
            },
            Loss::Mse,
            65,
        ),
    ]
}

#[test]
fn fused_cpu_gradient_matches_reference_within_1e_5() {
    for (i, (spec, lossk, n)) in cases().into_iter().enumerate() {
        let p = Params::init(&spec, i as u64);
        let data = common::random_data(n, spec.inputs, spec.outputs, i as u64);
        let (ref_loss, ref_grad) = reference::loss_and_grad(&p, &data, spec.activation, lossk);
        let count = (n * spec.outputs) as f64;
        let (loss, grad) = cpu_kernel::loss_and_grad(
            &p,
            spec.activation,
            lossk,
            &data,
            &Batch::Range(0, n),
            1.0 / count as f32,
            None,
        );
        let e = rel_err(&grad, &ref_grad);
        assert!(e <= 1e-5, "case {i}: fused gradient off by {e:e}");
        assert!(
            (loss / count - ref_loss).abs() <= 1e-5 * ref_loss,
            "case {i}: loss {} vs {ref_loss}",
            loss / count
        );
    }
}

#[test]
fn fused_cpu_gradient_of_an_index_batch_matches_reference() {
    let spec = TrainConfig::default().model;
    let p = Params::init(&spec, 3);
    let data = common::random_data(500, 1, 1, 3);
    let idx: Vec<u32> = (0..500).step_by(3).map(|i| i as u32).collect();
    let sub = Dataset {
        x: idx.iter().map(|&i| data.x[i as usize]).collect(),
        y: idx.iter().map(|&i| data.y[i as usize]).collect(),
        ..data.clone()
    };
    let (_, ref_grad) = reference::loss_and_grad(&p, &sub, spec.activation, Loss::Mse);
    let (_, grad) = cpu_kernel::loss_and_grad(
        &p,
        spec.activation,
        Loss::Mse,
        &data,
        &Batch::Indices(idx.clone()),
        1.0 / idx.len() as f32,
        None,
    );
    assert!(rel_err(&grad, &ref_grad) <= 1e-5);
}

common::per_device! {
    fn general_gradient_matches_reference_on_every_backend(target) {
        for (i, (spec, lossk, n)) in cases().into_iter().enumerate() {
            let cfg = TrainConfig {
                model: spec,
                loss: lossk,
                n,
                ..TrainConfig::default()
            };
            let p = Params::init(&spec, 10 + i as u64);
            let data = common::random_data(n, spec.inputs, spec.outputs, 10 + i as u64);
            let (_, ref_grad) = reference::loss_and_grad(&p, &data, spec.activation, lossk);
            let g =
                common::gradient(target, &cfg, EngineKind::General, &p, &data, &Batch::Range(0, n));
            let g: Vec<f64> = g.into_iter().map(f64::from).collect();
            let e = rel_err(&g, &ref_grad);
            // On CUDA >= 12.8 CubeCL lets Burn's activations use reduced-precision
            // intrinsics (`__tanhf`): measured on an H200, 6.2e-4 (tanh) and 1.6e-4
            // (silu). The fused kernels keep full precision and pass 1e-5 there.
            let tol = if target.backend == Backend::Cuda {
                1e-3
            } else {
                1e-4
            };
            assert!(
                e <= tol,
                "{} case {i}: general gradient off by {e:e}",
                target.label()
            );
        }
    }
}

common::per_gpu! {
    fn fused_gpu_gradient_matches_reference_within_1e_5(target) {
        let base = TrainConfig::default().model;
        let own = [
            (base, Loss::Mse, 1000),
            (
                ModelSpec {
                    hidden: 7,
                    activation: Activation::Tanh,
                    ..base
                },
                Loss::Huber,
                333,
            ),
            (
                ModelSpec {
                    hidden: 32,
                    activation: Activation::Gelu,
                    ..base
                },
                Loss::L1,
                1029,
            ),
            (
                ModelSpec {
                    hidden: 5,
                    activation: Activation::Sigmoid,
                    ..base
                },
                Loss::Mse,
                70_001,
            ),
            (
                ModelSpec {
                    hidden: 16,
                    activation: Activation::Silu,
                    ..base
                },
                Loss::Mse,
                257,
            ),
            // Wide layers: hidden units split over several lanes per point
            // (two inputs: ReLU's output-weight sum made from the first layer's).
            (
                ModelSpec {
                    inputs: 2,
                    hidden: 64,
                    ..base
                },
                Loss::Mse,
                2001,
            ),
            (
                ModelSpec {
                    hidden: 128,
                    ..base
                },
                Loss::Huber,
                4099,
            ),
            // Lanes whose share runs past the layer (padding units).
            (
                ModelSpec {
                    inputs: 3,
                    hidden: 100,
                    outputs: 2,
                    activation: Activation::Silu,
                    ..base
                },
                Loss::Mse,
                1234,
            ),
            (
                ModelSpec {
                    inputs: 2,
                    hidden: 50,
                    outputs: 2,
                    activation: Activation::Tanh,
                    ..base
                },
                Loss::Mse,
                777,
            ),
            // A row of 11 values: no plane operations (lavapipe) sum it in
            // one chunk of 16 columns, the last five unused.
            (
                ModelSpec {
                    hidden: 3,
                    activation: Activation::Tanh,
                    ..base
                },
                Loss::Mse,
                1001,
            ),
            // Several inputs, one output (the first layer's sums taken
            // without the output weight, which is applied once at the end).
            (
                ModelSpec {
                    inputs: 4,
                    hidden: 6,
                    ..base
                },
                Loss::L1,
                3001,
            ),
            // Several inputs and outputs.
            (
                ModelSpec {
                    inputs: 3,
                    hidden: 8,
                    outputs: 2,
                    activation: Activation::Tanh,
                    ..base
                },
                Loss::Mse,
                515,
            ),
            (
                ModelSpec {
                    inputs: 2,
                    hidden: 12,
                    outputs: 3,
                    activation: Activation::Relu,
                    ..base
                },
                Loss::Huber,
                1000,
            ),
            // The tiled kernel: several hidden layers (and cases() has two more), or
            // one layer too wide for the per-point kernels.
            (
                ModelSpec {
                    inputs: 2,
                    hidden: 24,
                    layers: 8,
                    outputs: 3,
                    activation: Activation::Sigmoid,
                },
                Loss::L1,
                1001,
            ),
            (
                ModelSpec {
                    hidden: 128,
                    layers: 2,
                    ..base
                },
                Loss::Mse,
                300,
            ),
            // Tiles of fewer than 32 points where shared memory is 48 KiB or
            // less (Vulkan): blocks of 2 points, cubes of up to 1,024 units.
            (
                ModelSpec {
                    hidden: 64,
                    layers: 6,
                    ..base
                },
                Loss::Mse,
                1000,
            ),
            // Many cubes' partial rows to sum (the reduction's unrolled loop).
            (
                ModelSpec {
                    hidden: 16,
                    layers: 2,
                    ..base
                },
                Loss::Mse,
                40_001,
            ),
            (
                ModelSpec {
                    inputs: 16,
                    hidden: 40,
                    outputs: 4,
                    activation: Activation::Silu,
                    ..base
                },
                Loss::Mse,
                2050,
            ),
        ];
        let deep = cases().into_iter().filter(|(spec, _, _)| spec.layers > 1);
        let cases: Vec<_> = own.into_iter().chain(deep).collect();
        for (i, (spec, lossk, n)) in cases.iter().copied().enumerate() {
            let cfg = TrainConfig {
                model: spec,
                loss: lossk,
                n,
                ..TrainConfig::default()
            };
            let p = Params::init(&spec, 20 + i as u64);
            let data = common::random_data(n, spec.inputs, spec.outputs, 20 + i as u64);
            let (_, ref_grad) = reference::loss_and_grad(&p, &data, spec.activation, lossk);
            for batch in [
                Batch::Range(0, n),
                Batch::Indices((0..n as u32).rev().collect()),
            ] {
                let g = common::gradient(target, &cfg, EngineKind::Fused, &p, &data, &batch);
                let g: Vec<f64> = g.into_iter().map(f64::from).collect();
                let e = rel_err(&g, &ref_grad);
                assert!(
                    e <= 1e-5,
                    "{} case {i}: fused GPU gradient off by {e:e}",
                    target.label()
                );
            }
        }
    }
}
