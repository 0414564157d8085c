//! The trained model as safetensors (f32, PyTorch layout and names:
//! `layers.{i}.weight` `[out, in]`, `layers.{i}.bias` `[out]`), and back.

use crate::config::Activation;
use crate::error::{FerroError, Result};
use crate::io::write_atomic;
use crate::model::{LayerParams, Params};
use crate::userdata::Normalization;
use safetensors::tensor::{Dtype, TensorView};
use safetensors::SafeTensors;
use std::collections::HashMap;
use std::path::Path;

/// Named f32 tensors (name, shape, little-endian bytes) as safetensors bytes.
pub fn serialize(
    tensors: &[(String, Vec<usize>, Vec<u8>)],
    metadata: HashMap<String, String>,
    path: &Path,
) -> Result<Vec<u8>> {
    let views: Vec<(String, TensorView)> = tensors
        .iter()
        .map(|(n, s, b)| {
            (
                n.clone(),
                TensorView::new(Dtype::F32, s.clone(), b).expect("shape matches data"),
            )
        })
        .collect();
    safetensors::serialize(views, Some(metadata)).map_err(|e| FerroError::ModelFile {
        path: path.display().to_string(),
        detail: e.to_string(),
    })
}

/// The parameters as named tensors, in [`Params::named`] order.
pub fn tensors(p: &Params) -> Vec<(String, Vec<usize>, Vec<u8>)> {
    p.named()
        .into_iter()
        .map(|(n, shape, v)| (n, shape, v.iter().flat_map(|x| x.to_le_bytes()).collect()))
        .collect()
}

/// Saves `p` to `path` atomically, with `metadata` (e.g. the activation) in the header.
pub fn save(p: &Params, path: &Path, metadata: HashMap<String, String>) -> Result<()> {
    write_atomic(path, &serialize(&tensors(p), metadata, path)?)
}

/// A saved model with what it needs to run: its weights, activation and, for a
/// `--csv` run, the standardisation of inputs and targets.
#[derive(Clone, Debug)]
pub struct SavedModel {
    pub params: Params,
    pub activation: Activation,
    pub normalization: Option<Normalization>,
}

/// Loads a model saved by [`save`].
pub fn load(path: &Path) -> Result<Params> {
    load_with_metadata(path).map(|(p, _)| p)
}

/// Loads a model with its activation and standardisation, every field checked
/// against the weights; when a `run.json` lies beside it, the model must be the
/// one that record names.
pub fn load_model(path: &Path) -> Result<SavedModel> {
    let err = |detail: String| FerroError::ModelFile {
        path: path.display().to_string(),
        detail,
    };
    let (params, meta) = load_with_metadata(path)?;
    let activation: Activation = match meta.get("activation") {
        None => Activation::Relu,
        Some(s) => serde_json::from_value(serde_json::Value::String(s.clone()))
            .map_err(|e| err(format!("unknown activation in its metadata ({e})")))?,
    };
    let normalization: Option<Normalization> = meta
        .get("normalization")
        .map(|s| serde_json::from_str(s))
        .transpose()
        .map_err(|e| {
            err(format!(
                "damaged normalization metadata ({e}); retrain with `ferrofit train --csv`"
            ))
        })?;
    if let Some(n) = &normalization {
        let (fan_in, fan_out) = (
            params.layers[0].fan_in,
            params.layers[params.layers.len() - 1].fan_out,
        );
        let good = |v: &[f64], k: usize, positive: bool| {
            v.len() == k && v.iter().all(|x| x.is_finite() && (!positive || *x > 0.0))
        };
        if !(n.inputs.len() == fan_in
            && n.targets.len() == fan_out
            && good(&n.x_mean, fan_in, false)
            && good(&n.x_std, fan_in, true)
            && good(&n.y_mean, fan_out, false)
            && good(&n.y_std, fan_out, true))
        {
            return Err(err(format!(
                "its normalization does not fit the model ({fan_in} inputs, {fan_out} outputs; means finite, deviations > 0); retrain with `ferrofit train --csv`"
            )));
        }
    }
    check_record(path)?;
    Ok(SavedModel {
        params,
        activation,
        normalization,
    })
}

/// The model's checksum as a run record names it.
pub fn checksum(bytes: &[u8]) -> String {
    format!("{:016x}", crate::io::fnv1a(&[bytes]))
}

/// A `run.json` beside the model names its checksum: a model from another run
/// (or damaged) is refused rather than run under the wrong record.
fn check_record(path: &Path) -> Result<()> {
    let Some(record) = path.parent().map(|d| d.join("run.json")) else {
        return Ok(());
    };
    let Ok(text) = std::fs::read_to_string(&record) else {
        return Ok(());
    };
    let want = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v["model_checksum"].as_str().map(String::from));
    let Some(want) = want else {
        return Ok(());
    };
    let bytes = std::fs::read(path).map_err(|source| FerroError::Io {
        action: "reading",
        path: path.display().to_string(),
        source,
    })?;
    if checksum(&bytes) != want {
        return Err(FerroError::ModelFile {
            path: path.display().to_string(),
            detail: format!(
                "it is not the model {} names (checksum {} vs {want}): the file was changed or comes from another run; train again, or pass the model file on its own",
                record.display(),
                checksum(&bytes)
            ),
        });
    }
    Ok(())
}

/// Loads a model and the metadata saved with it. Every tensor must be a
/// `layers.{i}.weight` `[out, in]` or `layers.{i}.bias` `[out]` in f32, finite,
/// for `i` in `0..L` with each layer feeding the next.
pub fn load_with_metadata(path: &Path) -> Result<(Params, HashMap<String, String>)> {
    let err = |detail: String| FerroError::ModelFile {
        path: path.display().to_string(),
        detail,
    };
    let bytes = std::fs::read(path).map_err(|source| FerroError::Io {
        action: "reading",
        path: path.display().to_string(),
        source,
    })?;
    let st = SafeTensors::deserialize(&bytes).map_err(|e| err(format!("not a safetensors file ({e}); pass the model.safetensors that `ferrofit train --out` wrote")))?;
    let count = st.len();
    if count == 0 || count % 2 != 0 {
        return Err(err(format!(
            "it holds {count} tensors; a model holds a weight and a bias per layer"
        )));
    }
    let mut layers = Vec::new();
    for i in 0..count / 2 {
        let get = |kind: &str| {
            st.tensor(&format!("layers.{i}.{kind}"))
                .map_err(|_| err(format!("layers.{i}.{kind} is missing")))
        };
        let (w, b) = (get("weight")?, get("bias")?);
        let shape = w.shape();
        if w.dtype() != Dtype::F32 || b.dtype() != Dtype::F32 {
            return Err(err(format!("layers.{i} must be f32")));
        }
        if shape.len() != 2 || shape[0] == 0 || shape[1] == 0 || b.shape() != [shape[0]] {
            return Err(err(format!(
                "layers.{i} has weight {:?} and bias {:?}; want [out, in] and [out], sizes >= 1",
                shape,
                b.shape()
            )));
        }
        let floats = |d: &[u8]| {
            d.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect::<Vec<_>>()
        };
        let (wv, bv) = (floats(w.data()), floats(b.data()));
        if !wv.iter().chain(&bv).all(|x| x.is_finite()) {
            return Err(err(format!(
                "layers.{i} holds non-finite values (a diverged run?); train again"
            )));
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
            return Err(err(format!(
                "layers.{i} and layers.{} do not connect ({} outputs feed {} inputs)",
                i + 1,
                w[0].fan_out,
                w[1].fan_in
            )));
        }
    }
    let meta = SafeTensors::read_metadata(&bytes)
        .ok()
        .and_then(|(_, m)| m.metadata().clone())
        .unwrap_or_default();
    Ok((Params { layers }, meta))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TrainConfig;

    #[test]
    fn save_then_load_is_identity() {
        let p = Params::init(&TrainConfig::default().model, 5);
        let path =
            std::env::temp_dir().join(format!("ferrofit-save-{}.safetensors", std::process::id()));
        save(&p, &path, HashMap::new()).unwrap();
        assert_eq!(load(&path).unwrap(), p);
        std::fs::write(&path, b"garbage").unwrap();
        assert!(load(&path)
            .unwrap_err()
            .to_string()
            .contains("not a safetensors file"));
        std::fs::remove_file(path).unwrap();
    }

    /// Each damaged model is refused with the tensor or field named (each of
    /// these loaded, crashed or predicted wrongly before).
    #[test]
    fn damaged_models_are_refused_naming_what_is_wrong() {
        let dir = std::env::temp_dir().join(format!("ferrofit-bad-model-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let t = |n: &str, shape: &[usize], v: &[f32]| (n.to_string(), shape.to_vec(), f(v));
        let good = || {
            vec![
                t("layers.0.weight", &[2, 1], &[1.0, 2.0]),
                t("layers.0.bias", &[2], &[0.0, 0.0]),
                t("layers.1.weight", &[1, 2], &[1.0, 1.0]),
                t("layers.1.bias", &[1], &[0.5]),
            ]
        };
        let write = |tensors: Vec<(String, Vec<usize>, Vec<u8>)>, meta: &[(&str, &str)]| {
            let p = dir.join("m.safetensors");
            let meta = meta
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            std::fs::write(&p, serialize(&tensors, meta, &p).unwrap()).unwrap();
            p
        };
        assert_eq!(load(&write(good(), &[])).unwrap().layers.len(), 2);
        let mut no_bias = good();
        no_bias.remove(3);
        no_bias.push(t("extra", &[1], &[0.0]));
        let mut short_bias = good();
        short_bias[3] = t("layers.1.bias", &[0], &[]);
        let mut zero = good();
        zero[2] = t("layers.1.weight", &[1, 0], &[]);
        let mut nan = good();
        nan[0] = t("layers.0.weight", &[2, 1], &[1.0, f32::NAN]);
        let mut three = good();
        three.remove(3);
        for (tensors, want) in [
            (no_bias, "layers.1.bias is missing"),
            (short_bias, "layers.1 has weight"),
            (zero, "layers.1 has weight"),
            (nan, "non-finite"),
            (three, "3 tensors"),
        ] {
            let e = load(&write(tensors, &[])).unwrap_err().to_string();
            assert!(e.contains(want), "{e} (want {want})");
        }
        let short_norm = r#"{"inputs":["a"],"targets":["y"],"x_mean":[0.0],"x_std":[],"y_mean":[0.0],"y_std":[1.0]}"#;
        for (meta, want) in [
            (("normalization", short_norm), "does not fit the model"),
            (("normalization", "{"), "damaged normalization"),
            (("activation", "swish9"), "unknown activation"),
        ] {
            let e = load_model(&write(good(), &[meta])).unwrap_err().to_string();
            assert!(e.contains(want), "{e} (want {want})");
        }
        // A run.json beside it that names another model's checksum.
        let p = write(good(), &[]);
        std::fs::write(
            dir.join("run.json"),
            r#"{"model_checksum":"0000000000000000"}"#,
        )
        .unwrap();
        let e = load_model(&p).unwrap_err().to_string();
        assert!(e.contains("another run"), "{e}");
        let sum = checksum(&std::fs::read(&p).unwrap());
        std::fs::write(
            dir.join("run.json"),
            format!(r#"{{"model_checksum":"{sum}"}}"#),
        )
        .unwrap();
        assert!(load_model(&p).is_ok());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
