//! MLP parameters on the host, in PyTorch's layout: `weight` is `[out, in]`.
//!
//! This is the one currency every engine trades in: initial weights are made
//! here (so all engines start from the same point), and trained weights come
//! back here to be saved.

use crate::config::ModelSpec;
use crate::rng::{stream, uniform};

/// One linear layer: `y = W x + b`, `w` row-major `[fan_out][fan_in]`.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerParams {
    /// Inputs of the layer.
    pub fan_in: usize,
    /// Outputs of the layer.
    pub fan_out: usize,
    /// Weights, `fan_out × fan_in`, row-major (PyTorch's layout).
    pub w: Vec<f32>,
    /// Biases, `fan_out`.
    pub b: Vec<f32>,
}

/// All layers, input to output.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// The layers, input first.
    pub layers: Vec<LayerParams>,
}

impl Params {
    /// PyTorch's default `nn.Linear` init: W, b ~ U(-1/√fan_in, 1/√fan_in).
    pub fn init(spec: &ModelSpec, seed: u64) -> Params {
        let layers = spec
            .layer_dims()
            .into_iter()
            .enumerate()
            .map(|(l, (fan_in, fan_out))| {
                let bound = 1.0 / (fan_in as f64).sqrt();
                let s = stream::INIT + l as u64;
                let draw = |i: usize| ((2.0 * uniform(seed, s, i as u64) - 1.0) * bound) as f32;
                let w = (0..fan_in * fan_out).map(draw).collect();
                let b = (0..fan_out).map(|i| draw(fan_in * fan_out + i)).collect();
                LayerParams {
                    fan_in,
                    fan_out,
                    w,
                    b,
                }
            })
            .collect();
        Params { layers }
    }

    /// Zeros with the same shapes.
    pub fn zeros_like(&self) -> Params {
        Params {
            layers: self
                .layers
                .iter()
                .map(|l| LayerParams {
                    w: vec![0.0; l.w.len()],
                    b: vec![0.0; l.b.len()],
                    ..*l
                })
                .collect(),
        }
    }

    /// Every scalar, layer by layer, weights then bias.
    pub fn flatten(&self) -> Vec<f32> {
        let mut v = Vec::new();
        for l in &self.layers {
            v.extend_from_slice(&l.w);
            v.extend_from_slice(&l.b);
        }
        v
    }

    /// Inverse of [`Params::flatten`] with this object's shapes.
    pub fn with_flat(&self, flat: &[f32]) -> Params {
        let mut out = self.clone();
        let mut at = 0;
        for l in &mut out.layers {
            let (nw, nb) = (l.w.len(), l.b.len());
            l.w.copy_from_slice(&flat[at..at + nw]);
            l.b.copy_from_slice(&flat[at + nw..at + nw + nb]);
            at += nw + nb;
        }
        out
    }

    /// Number of scalars.
    pub fn len(&self) -> usize {
        self.layers.iter().map(|l| l.w.len() + l.b.len()).sum()
    }

    /// True when there are no parameters.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Names and tensors as saved: `layers.{i}.weight` `[out, in]`, `layers.{i}.bias` `[out]`.
    pub fn named(&self) -> Vec<(String, Vec<usize>, &[f32])> {
        let mut v = Vec::new();
        for (i, l) in self.layers.iter().enumerate() {
            v.push((
                format!("layers.{i}.weight"),
                vec![l.fan_out, l.fan_in],
                &l.w[..],
            ));
            v.push((format!("layers.{i}.bias"), vec![l.fan_out], &l.b[..]));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TrainConfig;

    #[test]
    fn init_is_seeded_bounded_and_round_trips() {
        let spec = TrainConfig::default().model;
        let p = Params::init(&spec, 1);
        assert_eq!(p, Params::init(&spec, 1));
        assert_ne!(p, Params::init(&spec, 2));
        assert_eq!(p.len(), spec.parameter_count());
        assert!(p.layers[1].w.iter().all(|w| w.abs() <= 1.0 / 10f32.sqrt()));
        assert_eq!(p.with_flat(&p.flatten()), p);
    }
}
