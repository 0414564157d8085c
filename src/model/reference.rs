//! Float64 reference: forward, loss and backward of the MLP, one point at a time.
//!
//! Deliberately simple and slow. Every engine's gradient is tested against it.

use super::{activation, loss, Params};
use crate::config::{Activation, Loss};
use crate::task::Dataset;

/// The model's outputs for row-major inputs `x` (`points × fan_in`), in float64.
pub fn predict(p: &Params, act: Activation, x: &[f32]) -> Vec<f32> {
    let fan_in = p.layers[0].fan_in;
    let last = p.layers.len() - 1;
    x.chunks_exact(fan_in)
        .flat_map(|row| {
            let mut a: Vec<f64> = row.iter().map(|&v| v as f64).collect();
            for (li, l) in p.layers.iter().enumerate() {
                a = (0..l.fan_out)
                    .map(|o| {
                        let z = l.b[o] as f64
                            + (0..l.fan_in)
                                .map(|k| l.w[o * l.fan_in + k] as f64 * a[k])
                                .sum::<f64>();
                        if li == last {
                            z
                        } else {
                            activation::apply(act, z)
                        }
                    })
                    .collect();
            }
            a.into_iter().map(|v| v as f32)
        })
        .collect()
}

/// Mean loss over all points and outputs, and its gradient (flattened like
/// [`Params::flatten`]), in float64.
pub fn loss_and_grad(p: &Params, data: &Dataset, act: Activation, lossk: Loss) -> (f64, Vec<f64>) {
    let n = data.len();
    let count = (n * data.outputs) as f64;
    let mut grad: Vec<Vec<f64>> = p
        .layers
        .iter()
        .map(|l| vec![0.0; l.w.len() + l.b.len()])
        .collect();
    let mut total = 0.0;
    for i in 0..n {
        // Forward, keeping each layer's input and pre-activation.
        let mut a: Vec<f64> = data.x[i * data.inputs..(i + 1) * data.inputs]
            .iter()
            .map(|&v| v as f64)
            .collect();
        let mut inputs = Vec::new();
        let mut pres = Vec::new();
        let last = p.layers.len() - 1;
        for (li, l) in p.layers.iter().enumerate() {
            let z: Vec<f64> = (0..l.fan_out)
                .map(|o| {
                    l.b[o] as f64
                        + (0..l.fan_in)
                            .map(|k| l.w[o * l.fan_in + k] as f64 * a[k])
                            .sum::<f64>()
                })
                .collect();
            inputs.push(a);
            a = if li == last {
                z.clone()
            } else {
                z.iter().map(|&v| activation::apply(act, v)).collect()
            };
            pres.push(z);
        }
        // Loss and backward.
        let target = &data.y[i * data.outputs..(i + 1) * data.outputs];
        let mut delta: Vec<f64> = a
            .iter()
            .zip(target)
            .map(|(&pr, &t)| {
                total += loss::value(lossk, pr, t as f64);
                loss::derivative(lossk, pr, t as f64) / count
            })
            .collect();
        for li in (0..p.layers.len()).rev() {
            let l = &p.layers[li];
            let g = &mut grad[li];
            for o in 0..l.fan_out {
                for k in 0..l.fan_in {
                    g[o * l.fan_in + k] += delta[o] * inputs[li][k];
                }
                g[l.w.len() + o] += delta[o];
            }
            if li > 0 {
                delta = (0..l.fan_in)
                    .map(|k| {
                        let back: f64 = (0..l.fan_out)
                            .map(|o| l.w[o * l.fan_in + k] as f64 * delta[o])
                            .sum();
                        back * activation::derivative(act, pres[li - 1][k])
                    })
                    .collect();
            }
        }
    }
    (total / count, grad.concat())
}

/// Relative L2 distance `|a - b| / |b|` between a gradient and its reference.
pub fn relative_error<A: Copy + Into<f64>>(a: &[A], b: &[f64]) -> f64 {
    let num: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| ((*x).into() - y).powi(2))
        .sum::<f64>()
        .sqrt();
    let den: f64 = b.iter().map(|y| y * y).sum::<f64>().sqrt();
    num / den.max(1e-30)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ModelSpec, TrainConfig};
    use crate::task::Task;

    /// The reference gradient agrees with central finite differences of the reference loss.
    #[test]
    fn gradient_matches_finite_differences() {
        let spec = ModelSpec {
            hidden: 5,
            layers: 2,
            activation: Activation::Tanh,
            ..TrainConfig::default().model
        };
        let p = Params::init(&spec, 9);
        let data = Task::Sin.generate(17, 4);
        for lossk in [Loss::Mse, Loss::Huber] {
            let (_, g) = loss_and_grad(&p, &data, spec.activation, lossk);
            let flat = p.flatten();
            for j in (0..flat.len()).step_by(3) {
                let h = 1e-3f32;
                let mut up = flat.clone();
                up[j] += h;
                let mut down = flat.clone();
                down[j] -= h;
                let lu = loss_and_grad(&p.with_flat(&up), &data, spec.activation, lossk).0;
                let ld = loss_and_grad(&p.with_flat(&down), &data, spec.activation, lossk).0;
                let fd = (lu - ld) / (up[j] as f64 - down[j] as f64);
                assert!(
                    (fd - g[j]).abs() < 1e-4 * (1.0 + g[j].abs()),
                    "param {j}: fd {fd} vs {}",
                    g[j]
                );
            }
        }
    }
}
