//! The trained model as safetensors (f32, PyTorch layout and names:
//! `layers.{i}.weight` `[out, in]`, `layers.{i}.bias` `[out]`), and back.

use crate::error::{FerroError, Result};
use crate::io::write_atomic;
use crate::model::{LayerParams, Params};
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

/// Loads a model saved by [`save`].
pub fn load(path: &Path) -> Result<Params> {
    load_with_metadata(path).map(|(p, _)| p)
}

/// Loads a model and the metadata saved with it.
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
    let mut layers = Vec::new();
    for i in 0.. {
        let (Ok(w), Ok(b)) = (
            st.tensor(&format!("layers.{i}.weight")),
            st.tensor(&format!("layers.{i}.bias")),
        ) else {
            break;
        };
        if w.dtype() != Dtype::F32 || b.dtype() != Dtype::F32 || w.shape().len() != 2 {
            return Err(err(format!("layers.{i} must be f32 with a 2-D weight")));
        }
        let floats = |d: &[u8]| {
            d.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect::<Vec<_>>()
        };
        layers.push(LayerParams {
            fan_out: w.shape()[0],
            fan_in: w.shape()[1],
            w: floats(w.data()),
            b: floats(b.data()),
        });
    }
    if layers.is_empty() {
        return Err(err("no layers.0.weight tensor found".into()));
    }
    for (i, w) in layers.windows(2).enumerate() {
        if w[0].fan_out != w[1].fan_in || w[0].b.len() != w[0].fan_out {
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
}
