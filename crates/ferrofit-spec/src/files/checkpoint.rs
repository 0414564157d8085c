//! A resumable checkpoint as bytes: the weights, the optimizer's state, the
//! step and the run's configuration (which fixes the data, the batches and the
//! schedule — every random draw in ferrofit is a counter-based function of the
//! seed and the step, so no RNG state beyond those is needed). One FNV-1a
//! checksum covers the header entries and every tensor byte (format v2; v1
//! files, whose checksum covered the tensors only, are still read).

use super::{bytes, floats, fnv1a, serialize};
use crate::config::TrainConfig;
use crate::error::FerroError;
use crate::params::{LayerParams, Params};
use safetensors::SafeTensors;
use std::collections::HashMap;

/// An optimizer's state as flat vectors (empty where the optimizer keeps none).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OptState {
    /// Momentum or Adam's first moments.
    pub m: Vec<f32>,
    /// Adam's second moments.
    pub v: Vec<f32>,
    /// Updates applied so far (Adam's bias correction, momentum's first step).
    pub t: i32,
}

/// Everything needed to continue a run exactly where it stopped.
#[derive(Clone, Debug, PartialEq)]
pub struct Checkpoint {
    /// Optimizer steps completed.
    pub step: usize,
    /// The job, as validated.
    pub config: TrainConfig,
    /// The weights.
    pub params: Params,
    /// The optimizer's state.
    pub opt: OptState,
    /// The backend (`--backend` name) and device index that wrote it; a resume
    /// continues there unless told otherwise.
    pub device: (String, usize),
}

/// The format this build writes; `v1` files (checksum over the tensors
/// only) are still read.
pub const FORMAT: &str = "ferrofit-checkpoint-v2";
const FORMAT_V1: &str = "ferrofit-checkpoint-v1";

/// The checksum of a v2 file: every header entry but the checksum itself (in
/// key order, `key=value;`), then every tensor's bytes in name order.
fn sum_v2(meta: &HashMap<String, String>, tensors: &[&[u8]]) -> u64 {
    let mut keys: Vec<&String> = meta.keys().filter(|k| *k != "checksum").collect();
    keys.sort();
    let header: Vec<u8> = keys
        .iter()
        .flat_map(|k| format!("{k}={};", meta[*k]).into_bytes())
        .collect();
    let mut chunks = vec![header.as_slice()];
    chunks.extend_from_slice(tensors);
    fnv1a(&chunks)
}

/// `c` as checkpoint bytes. Non-finite weights or optimizer state are refused
/// (a checkpoint is a state worth returning to).
pub fn encode(c: &Checkpoint) -> Result<Vec<u8>, FerroError> {
    let finite = |v: &[f32]| v.iter().all(|x| x.is_finite());
    let weights = c.params.layers.iter().all(|l| finite(&l.w) && finite(&l.b));
    if !(weights && finite(&c.opt.m) && finite(&c.opt.v)) {
        return Err(FerroError::Diverged {
            step: c.step.saturating_sub(1),
            value: f32::NAN,
        });
    }
    let mut tensors = super::model::tensors(&c.params);
    tensors.push(("optim.m".into(), vec![c.opt.m.len()], bytes(&c.opt.m)));
    tensors.push(("optim.v".into(), vec![c.opt.v.len()], bytes(&c.opt.v)));
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    let mut meta = HashMap::from([
        ("format".to_string(), FORMAT.to_string()),
        ("step".to_string(), c.step.to_string()),
        ("optim.t".to_string(), c.opt.t.to_string()),
        (
            "config".to_string(),
            serde_json::to_string(&c.config).expect("config serialises"),
        ),
        ("backend".to_string(), c.device.0.clone()),
        ("device".to_string(), c.device.1.to_string()),
    ]);
    let sum = sum_v2(
        &meta,
        &tensors.iter().map(|t| t.2.as_slice()).collect::<Vec<_>>(),
    );
    meta.insert("checksum".into(), format!("{sum:016x}"));
    serialize(&tensors, meta).map_err(|detail| FerroError::File {
        path: format!("checkpoint of step {}", c.step),
        detail,
    })
}

/// Checkpoint bytes, verified: the checksum over header and tensors, then
/// every field against the configuration saved with it, sizes before any
/// allocation they imply.
pub fn decode(data: &[u8]) -> Result<Checkpoint, String> {
    let st = SafeTensors::deserialize(data).map_err(|e| format!("unreadable ({e})"))?;
    let (_, meta) = SafeTensors::read_metadata(data).map_err(|e| e.to_string())?;
    let meta = meta.metadata().clone().unwrap_or_default();
    let get = |k: &str| {
        meta.get(k)
            .cloned()
            .ok_or(format!("no `{k}` in its header"))
    };
    let mut names: Vec<String> = st.names().into_iter().map(String::from).collect();
    names.sort();
    let raw: Vec<&[u8]> = names
        .iter()
        .map(|n| st.tensor(n).map(|t| t.data()).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let sum = match get("format")?.as_str() {
        FORMAT => sum_v2(&meta, &raw),
        FORMAT_V1 => fnv1a(&raw),
        _ => return Err("not a ferrofit checkpoint".into()),
    };
    if format!("{sum:016x}") != get("checksum")? {
        return Err("checksum mismatch (the file is damaged)".into());
    }
    let config: TrainConfig =
        serde_json::from_str(&get("config")?).map_err(|e| format!("bad config ({e})"))?;
    config
        .validate()
        .map_err(|e| format!("its configuration is not valid ({e})"))?;
    // Sizes come from the configuration: check them against the file before
    // allocating the model they describe.
    let count = config.model.parameter_count();
    if count > data.len() / 4 {
        return Err(format!(
            "its configuration describes {count} weights, more than the file holds"
        ));
    }
    let step: usize = get("step")?.parse().map_err(|_| "bad step".to_string())?;
    if step == 0 || step > config.steps {
        return Err(format!(
            "step {step} is outside the run's 1..={} steps",
            config.steps
        ));
    }
    let t: i32 = get("optim.t")?
        .parse()
        .map_err(|_| "bad optim.t".to_string())?;
    if t < 0 || t as usize > step * config.accumulate.max(1) {
        return Err(format!("optim.t {t} does not fit step {step}"));
    }
    let tensor = |n: &str| {
        let t = st.tensor(n).map_err(|e| e.to_string())?;
        if t.dtype() != safetensors::Dtype::F32 {
            return Err(format!("{n} is not f32"));
        }
        let v = floats(t.data());
        if !v.iter().all(|x| x.is_finite()) {
            return Err(format!("{n} holds non-finite values"));
        }
        Ok(v)
    };
    let mut layers = Vec::new();
    for (i, (fan_in, fan_out)) in config.model.layer_dims().into_iter().enumerate() {
        let w = tensor(&format!("layers.{i}.weight"))?;
        let b = tensor(&format!("layers.{i}.bias"))?;
        if w.len() != fan_in * fan_out || b.len() != fan_out {
            return Err(format!("layers.{i} does not match the model in its config"));
        }
        layers.push(LayerParams {
            fan_in,
            fan_out,
            w,
            b,
        });
    }
    let params = Params { layers };
    let opt = OptState {
        m: tensor("optim.m")?,
        v: tensor("optim.v")?,
        t,
    };
    for (name, v) in [("optim.m", &opt.m), ("optim.v", &opt.v)] {
        if !(v.is_empty() || v.len() == params.len()) {
            return Err(format!(
                "{name} holds {} values for {} weights",
                v.len(),
                params.len()
            ));
        }
    }
    Ok(Checkpoint {
        step,
        params,
        opt,
        device: (
            meta.get("backend").cloned().unwrap_or_default(),
            meta.get("device").and_then(|d| d.parse().ok()).unwrap_or(0),
        ),
        config,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Checkpoint {
        let config = TrainConfig::default();
        let params = Params::init(&config.model, 3);
        let n = params.len();
        Checkpoint {
            step: 40,
            params,
            opt: OptState {
                m: vec![0.25; n],
                v: vec![0.5; n],
                t: 40,
            },
            device: ("cpu".into(), 0),
            config,
        }
    }

    /// Every truncation and every single flipped byte of a checkpoint is
    /// refused (the checksum covers header and tensors); none panics.
    #[test]
    fn every_truncation_and_every_flipped_byte_is_refused() {
        let good = encode(&sample()).unwrap();
        assert_eq!(decode(&good).unwrap(), sample());
        for len in 0..good.len() {
            assert!(decode(&good[..len]).is_err(), "truncated to {len} bytes");
        }
        for at in 0..good.len() {
            let mut bad = good.clone();
            bad[at] ^= 0x01;
            assert!(decode(&bad).is_err(), "byte {at} flipped");
        }
    }
}
