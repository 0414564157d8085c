//! Resumable checkpoints: the weights, the optimizer's state, the step and the
//! run's configuration (which fixes the data, the batches and the schedule —
//! every random draw in ferrofit is a counter-based function of the seed and
//! the step, so no RNG state beyond those is needed). One safetensors file per
//! checkpoint, written atomically (temporary file, fsync, rename) with an
//! FNV-1a checksum of every tensor byte in its header. Loading takes the newest
//! file that verifies and says which damaged ones it passed over.

use crate::config::TrainConfig;
use crate::error::{FerroError, Result};
use crate::io::write_atomic;
use crate::model::Params;
use safetensors::SafeTensors;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// An optimizer's state as flat vectors (empty where the optimizer keeps none).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OptState {
    pub m: Vec<f32>,
    pub v: Vec<f32>,
    /// Updates applied so far (Adam's bias correction, momentum's first step).
    pub t: i32,
}

/// Everything needed to continue a run exactly where it stopped.
#[derive(Clone, Debug, PartialEq)]
pub struct Checkpoint {
    /// Optimizer steps completed.
    pub step: usize,
    pub config: TrainConfig,
    pub params: Params,
    pub opt: OptState,
    /// The backend (`--backend` name) and device index that wrote it; a resume
    /// continues there unless told otherwise.
    pub device: (String, usize),
}

/// Checkpoints kept on disk (older ones are removed after a newer one is written).
const KEEP: usize = 2;

/// The folder inside a run's output folder.
pub fn folder(out: &Path) -> PathBuf {
    out.join("checkpoints")
}

fn fnv1a(chunks: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for c in chunks {
        for &b in *c {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn floats(d: &[u8]) -> Vec<f32> {
    d.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Writes `c` into `dir` and removes all but the newest [`KEEP`] checkpoints.
pub fn write(dir: &Path, c: &Checkpoint) -> Result<PathBuf> {
    let mut tensors = crate::save::tensors(&c.params);
    tensors.push(("optim.m".into(), vec![c.opt.m.len()], bytes(&c.opt.m)));
    tensors.push(("optim.v".into(), vec![c.opt.v.len()], bytes(&c.opt.v)));
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    let sum = fnv1a(&tensors.iter().map(|t| t.2.as_slice()).collect::<Vec<_>>());
    let meta = HashMap::from([
        ("format".to_string(), "ferrofit-checkpoint-v1".to_string()),
        ("step".to_string(), c.step.to_string()),
        ("optim.t".to_string(), c.opt.t.to_string()),
        (
            "config".to_string(),
            serde_json::to_string(&c.config).expect("config serialises"),
        ),
        ("checksum".to_string(), format!("{sum:016x}")),
        ("backend".to_string(), c.device.0.clone()),
        ("device".to_string(), c.device.1.to_string()),
    ]);
    let path = dir.join(format!("step-{:09}.safetensors", c.step));
    let data = crate::save::serialize(&tensors, meta, &path)?;
    write_atomic(&path, &data)?;
    for old in list(dir).into_iter().rev().skip(KEEP) {
        let _ = std::fs::remove_file(old);
    }
    Ok(path)
}

/// Checkpoint files in `dir`, oldest first.
fn list(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("step-") && n.ends_with(".safetensors"))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Reads and verifies one checkpoint file.
pub fn read(path: &Path) -> std::result::Result<Checkpoint, String> {
    let data = std::fs::read(path).map_err(|e| e.to_string())?;
    let st = SafeTensors::deserialize(&data).map_err(|e| format!("unreadable ({e})"))?;
    let (_, meta) = SafeTensors::read_metadata(&data).map_err(|e| e.to_string())?;
    let meta = meta.metadata().clone().unwrap_or_default();
    let get = |k: &str| {
        meta.get(k)
            .cloned()
            .ok_or(format!("no `{k}` in its header"))
    };
    if get("format")? != "ferrofit-checkpoint-v1" {
        return Err("not a ferrofit checkpoint".into());
    }
    let mut names: Vec<String> = st.names().into_iter().map(String::from).collect();
    names.sort();
    let raw: Vec<&[u8]> = names
        .iter()
        .map(|n| st.tensor(n).map(|t| t.data()).map_err(|e| e.to_string()))
        .collect::<std::result::Result<_, _>>()?;
    if format!("{:016x}", fnv1a(&raw)) != get("checksum")? {
        return Err("checksum mismatch (the file is damaged)".into());
    }
    let config: TrainConfig =
        serde_json::from_str(&get("config")?).map_err(|e| format!("bad config ({e})"))?;
    let tensor = |n: &str| {
        st.tensor(n)
            .map(|t| floats(t.data()))
            .map_err(|e| e.to_string())
    };
    let template = Params::init(&config.model, config.seed);
    let mut flat = Vec::with_capacity(template.len());
    for (i, l) in template.layers.iter().enumerate() {
        let w = tensor(&format!("layers.{i}.weight"))?;
        let b = tensor(&format!("layers.{i}.bias"))?;
        if w.len() != l.w.len() || b.len() != l.b.len() {
            return Err(format!("layers.{i} does not match the model in its config"));
        }
        flat.extend(w);
        flat.extend(b);
    }
    Ok(Checkpoint {
        step: get("step")?.parse().map_err(|_| "bad step".to_string())?,
        params: template.with_flat(&flat),
        opt: OptState {
            m: tensor("optim.m")?,
            v: tensor("optim.v")?,
            t: get("optim.t")?
                .parse()
                .map_err(|_| "bad optim.t".to_string())?,
        },
        device: (
            meta.get("backend").cloned().unwrap_or_default(),
            meta.get("device").and_then(|d| d.parse().ok()).unwrap_or(0),
        ),
        config,
    })
}

/// The newest checkpoint in `dir` that verifies, and a note for each newer
/// one that did not.
pub fn latest(dir: &Path) -> Result<(Checkpoint, Vec<String>)> {
    let mut skipped = Vec::new();
    for path in list(dir).into_iter().rev() {
        match read(&path) {
            Ok(c) => return Ok((c, skipped)),
            Err(why) => skipped.push(format!(
                "{}: {why}; using the previous checkpoint",
                path.display()
            )),
        }
    }
    Err(FerroError::File {
        path: dir.display().to_string(),
        detail: if skipped.is_empty() {
            "no checkpoint here: train with --checkpoint-every K --out DIR, then --resume DIR"
                .into()
        } else {
            format!("no usable checkpoint ({})", skipped.join("; "))
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ckpt(step: usize) -> Checkpoint {
        let config = TrainConfig::default();
        let params = Params::init(&config.model, 9);
        let n = params.len();
        Checkpoint {
            step,
            params,
            opt: OptState {
                m: vec![0.5; n],
                v: vec![],
                t: step as i32,
            },
            device: ("wgpu".into(), 1),
            config,
        }
    }

    #[test]
    fn round_trips_keeps_two_and_passes_over_a_damaged_one() {
        let dir = std::env::temp_dir().join(format!("ferrofit-ckpt-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(latest(&dir)
            .unwrap_err()
            .to_string()
            .contains("--checkpoint-every"));
        for s in [10, 20, 30] {
            write(&dir, &ckpt(s)).unwrap();
        }
        assert_eq!(list(&dir).len(), KEEP);
        let (c, notes) = latest(&dir).unwrap();
        assert_eq!((c.clone(), notes.len()), (ckpt(30), 0));
        // Flip one byte of the newest file's data: the checksum catches it.
        let newest = list(&dir).pop().unwrap();
        let mut data = std::fs::read(&newest).unwrap();
        let last = data.len() - 3;
        data[last] ^= 0x40;
        std::fs::write(&newest, data).unwrap();
        let (c, notes) = latest(&dir).unwrap();
        assert_eq!(c.step, 20);
        assert!(notes[0].contains("checksum mismatch"), "{notes:?}");
        // A truncated file is passed over too.
        std::fs::write(&newest, b"\x10\x00").unwrap();
        assert_eq!(latest(&dir).unwrap().0.step, 20);
    }
}
