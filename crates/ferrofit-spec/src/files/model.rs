//! The trained model as safetensors bytes (f32, PyTorch's layout and names:
//! `layers.{i}.weight` `[out, in]`, `layers.{i}.bias` `[out]`), its activation
//! and any CSV standardisation in the header — and back, every tensor and
//! field checked.

use super::{floats, Tensor};
use crate::columns::Encoding;
use crate::config::Activation;
use crate::params::{LayerParams, Params};
use crate::userdata::Normalization;
use safetensors::tensor::Dtype;
use safetensors::SafeTensors;
use std::collections::HashMap;

type Result<T> = std::result::Result<T, String>;

/// A saved model with what it needs to run: its weights, activation and, for a
/// `--csv` run, the standardisation of inputs and targets.
#[derive(Clone, Debug, PartialEq)]
pub struct SavedModel {
    /// Weights and biases.
    pub params: Params,
    /// Hidden-layer activation.
    pub activation: Activation,
    /// The standardisation, when the model has one.
    pub normalization: Option<Normalization>,
}

/// The parameters as named tensors, in [`Params::named`] order.
pub fn tensors(p: &Params) -> Vec<Tensor> {
    p.named()
        .into_iter()
        .map(|(n, shape, v)| (n, shape, super::bytes(v)))
        .collect()
}

/// The weights of a model file. Every tensor must be a `layers.{i}.weight`
/// `[out, in]` or `layers.{i}.bias` `[out]` in f32, finite, for `i` in `0..L`
/// with each layer feeding the next.
pub fn decode_params(bytes: &[u8]) -> Result<Params> {
    let st = SafeTensors::deserialize(bytes).map_err(|e| format!("not a safetensors file ({e}); pass the model.safetensors that `ferrofit train --out` wrote"))?;
    let count = st.len();
    if count == 0 || count % 2 != 0 {
        return Err(format!(
            "it holds {count} tensors; a model holds a weight and a bias per layer"
        ));
    }
    let mut layers = Vec::new();
    for i in 0..count / 2 {
        let get = |kind: &str| {
            st.tensor(&format!("layers.{i}.{kind}"))
                .map_err(|_| format!("layers.{i}.{kind} is missing"))
        };
        let (w, b) = (get("weight")?, get("bias")?);
        let shape = w.shape();
        if w.dtype() != Dtype::F32 || b.dtype() != Dtype::F32 {
            return Err(format!("layers.{i} must be f32"));
        }
        if shape.len() != 2 || shape[0] == 0 || shape[1] == 0 || b.shape() != [shape[0]] {
            return Err(format!(
                "layers.{i} has weight {:?} and bias {:?}; want [out, in] and [out], sizes >= 1",
                shape,
                b.shape()
            ));
        }
        let (wv, bv) = (floats(w.data()), floats(b.data()));
        if !wv.iter().chain(&bv).all(|x| x.is_finite()) {
            return Err(format!(
                "layers.{i} holds non-finite values (a diverged run?); train again"
            ));
        }
        layers.push(LayerParams {
            fan_out: shape[0],
            fan_in: shape[1],
            w: wv,
            b: bv,
        });
    }
    for (i, w) in layers.windows(2).enumerate() {
        if w[0].fan_out != w[1].fan_in {
            return Err(format!(
                "layers.{i} and layers.{} do not connect ({} outputs feed {} inputs)",
                i + 1,
                w[0].fan_out,
                w[1].fan_in
            ));
        }
    }
    Ok(Params { layers })
}

/// A model file: its weights, activation and standardisation, each checked
/// against the others.
pub fn decode(bytes: &[u8]) -> Result<SavedModel> {
    let params = decode_params(bytes)?;
    let meta = super::metadata(bytes)?;
    let activation: Activation = match meta.get("activation") {
        None => Activation::Relu,
        Some(s) => serde_json::from_value(serde_json::Value::String(s.clone()))
            .map_err(|e| format!("unknown activation in its metadata ({e})"))?,
    };
    let normalization: Option<Normalization> = meta
        .get("normalization")
        .map(|s| serde_json::from_str(s))
        .transpose()
        .map_err(|e| {
            format!("damaged normalization metadata ({e}); retrain with `ferrofit train --csv`")
        })?;
    if let Some(n) = &normalization {
        let fan_in = params.layers[0].fan_in;
        let fan_out = params.layers[params.layers.len() - 1].fan_out;
        let good = |v: &[f64], k: usize, positive: bool| {
            v.len() == k && v.iter().all(|x| x.is_finite() && (!positive || *x > 0.0))
        };
        // Categories sorted and distinct: `predict` looks them up by bisection.
        let encodings_fit = (n.encodings.is_empty() || n.encodings.len() == n.inputs.len())
            && n.encodings.iter().all(|e| match e {
                Encoding::Categories(c) => !c.is_empty() && c.windows(2).all(|w| w[0] < w[1]),
                Encoding::Number => true,
            });
        if !(encodings_fit
            && n.input_width() == fan_in
            && n.targets.len() == fan_out
            && good(&n.x_mean, fan_in, false)
            && good(&n.x_std, fan_in, true)
            && good(&n.y_mean, fan_out, false)
            && good(&n.y_std, fan_out, true))
        {
            return Err(format!(
                "its normalization does not fit the model ({fan_in} inputs, {fan_out} outputs; means finite, deviations > 0); retrain with `ferrofit train --csv`"
            ));
        }
    }
    Ok(SavedModel {
        params,
        activation,
        normalization,
    })
}

/// The header a saved model carries.
pub fn header(activation: Activation, norm: Option<&Normalization>) -> HashMap<String, String> {
    let mut meta = HashMap::from([
        (
            "activation".to_string(),
            serde_json::to_value(activation)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
        ),
        ("format".to_string(), "ferrofit-mlp-v1".to_string()),
    ]);
    if let Some(n) = norm {
        meta.insert(
            "normalization".into(),
            serde_json::to_string(n).expect("numbers and names serialise"),
        );
    }
    meta
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ModelSpec, TrainConfig};

    /// Every truncation of a model file is refused, and a flipped byte either
    /// is refused or decodes to a model that passes every check; none panics.
    /// (A flipped weight is still a model: the run record's checksum is what
    /// catches it, in the main crate.)
    #[test]
    fn every_truncation_is_refused_and_no_flipped_byte_panics() {
        let spec = ModelSpec {
            hidden: 4,
            layers: 2,
            ..TrainConfig::default().model
        };
        let p = Params::init(&spec, 1);
        let good = super::super::serialize(&tensors(&p), header(Activation::Tanh, None)).unwrap();
        let m = decode(&good).unwrap();
        assert_eq!((m.params, m.activation), (p, Activation::Tanh));
        for len in 0..good.len() {
            assert!(decode(&good[..len]).is_err(), "truncated to {len} bytes");
        }
        for at in 0..good.len() {
            let mut bad = good.clone();
            bad[at] ^= 0x20;
            if let Ok(m) = decode(&bad) {
                assert!(m
                    .params
                    .layers
                    .iter()
                    .all(|l| l.w.len() == l.fan_in * l.fan_out));
            }
        }
    }
}
