//! The trained model on disk: `model.safetensors` written atomically and read
//! back checked (the format itself — PyTorch's layout and names, the header
//! with activation and standardisation, every tensor and field checked — is
//! `ferrofit_spec::files::model`). When a `run.json` lies beside a model, the
//! model must be the one that record names.

use crate::error::{FerroError, Result};
use crate::io::write_atomic;
use crate::model::Params;
pub use ferrofit_spec::files::model::{header, tensors, SavedModel};
use ferrofit_spec::files::{self, model};
use std::collections::HashMap;
use std::path::Path;

fn model_error(path: &Path) -> impl Fn(String) -> FerroError + '_ {
    move |detail| FerroError::ModelFile {
        path: path.display().to_string(),
        detail,
    }
}

/// Named f32 tensors and a header as safetensors bytes, for `path`.
pub fn serialize(
    tensors: &[files::Tensor],
    metadata: HashMap<String, String>,
    path: &Path,
) -> Result<Vec<u8>> {
    files::serialize(tensors, metadata).map_err(model_error(path))
}

/// Saves `p` to `path` atomically, with `metadata` (e.g. the activation) in
/// the header; returns the file's [`checksum`].
pub fn save(p: &Params, path: &Path, metadata: HashMap<String, String>) -> Result<String> {
    let bytes = serialize(&tensors(p), metadata, path)?;
    write_atomic(path, &bytes)?;
    Ok(checksum(&bytes))
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| FerroError::Io {
        action: "reading",
        path: path.display().to_string(),
        source,
    })
}

/// Loads the weights of a model saved by [`save`], each tensor checked.
pub fn load(path: &Path) -> Result<Params> {
    model::decode_params(&read(path)?).map_err(model_error(path))
}

/// Loads a model with its activation and standardisation, every field checked
/// against the weights; when a `run.json` lies beside it, the model must be the
/// one that record names.
pub fn load_model(path: &Path) -> Result<SavedModel> {
    let bytes = read(path)?;
    let m = model::decode(&bytes).map_err(model_error(path))?;
    check_record(path, &bytes)?;
    Ok(m)
}

/// The model's checksum as a run record names it.
pub fn checksum(bytes: &[u8]) -> String {
    format!("{:016x}", files::fnv1a(&[bytes]))
}

/// A `run.json` beside the model names its checksum: a model from another run
/// (or damaged) is refused rather than run under the wrong record.
fn check_record(path: &Path, bytes: &[u8]) -> Result<()> {
    let Some(record) = path.parent().map(|d| d.join("run.json")) else {
        return Ok(());
    };
    let Ok(text) = std::fs::read_to_string(&record) else {
        return Ok(());
    };
    let want = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v["model_checksum"].as_str().map(String::from));
    match want {
        Some(want) if checksum(bytes) != want => Err(model_error(path)(format!(
            "it is not the model {} names (checksum {} vs {want}): the file was changed or comes from another run; train again, or pass the model file on its own",
            record.display(),
            checksum(bytes)
        ))),
        _ => Ok(()),
    }
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
