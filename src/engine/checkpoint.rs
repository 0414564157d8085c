//! Resumable checkpoints: the weights, the optimizer's state, the step and the
//! run's configuration (which fixes the data, the batches and the schedule —
//! every random draw in ferrofit is a counter-based function of the seed and
//! the step, so no RNG state beyond those is needed). One safetensors file per
//! checkpoint, written atomically (temporary file, fsync, rename) with one
//! FNV-1a checksum over its header entries and every tensor byte. Only finite
//! state is written; reading checks the checksum, then every field against the
//! configuration saved with it (sizes, step, finiteness) before anything is
//! allocated from it. Loading takes the newest file that verifies and says
//! which damaged ones it passed over.

use crate::config::TrainConfig;
use crate::error::{FerroError, Result};
use crate::io::{fnv1a, write_atomic};
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

/// The format this build writes; `v1` files (checksum over the tensors
/// only) are still read.
const FORMAT: &str = "ferrofit-checkpoint-v2";
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

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn floats(d: &[u8]) -> Vec<f32> {
    d.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Writes `c` into `dir` and removes all but the newest [`KEEP`] checkpoints.
/// Non-finite weights or optimizer state are refused (a checkpoint is a state
/// worth returning to).
pub fn write(dir: &Path, c: &Checkpoint) -> Result<PathBuf> {
    let finite = |v: &[f32]| v.iter().all(|x| x.is_finite());
    let weights = c.params.layers.iter().all(|l| finite(&l.w) && finite(&l.b));
    if !(weights && finite(&c.opt.m) && finite(&c.opt.v)) {
        return Err(FerroError::Diverged {
            step: c.step.saturating_sub(1),
            value: f32::NAN,
        });
    }
    let mut tensors = crate::save::tensors(&c.params);
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
    let path = file(dir, c.step);
    let data = crate::save::serialize(&tensors, meta, &path)?;
    write_atomic(&path, &data)?;
    for old in list(dir).into_iter().rev().skip(KEEP) {
        let _ = std::fs::remove_file(old);
    }
    Ok(path)
}

/// The file of the checkpoint after `step` steps.
pub fn file(dir: &Path, step: usize) -> PathBuf {
    dir.join(format!("step-{step:09}.safetensors"))
}

/// Whether `dir` holds any checkpoint file.
pub fn any(dir: &Path) -> bool {
    !list(dir).is_empty()
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
    let mut names: Vec<String> = st.names().into_iter().map(String::from).collect();
    names.sort();
    let raw: Vec<&[u8]> = names
        .iter()
        .map(|n| st.tensor(n).map(|t| t.data()).map_err(|e| e.to_string()))
        .collect::<std::result::Result<_, _>>()?;
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
    let opt = OptState {
        m: tensor("optim.m")?,
        v: tensor("optim.v")?,
        t,
    };
    for (name, v) in [("optim.m", &opt.m), ("optim.v", &opt.v)] {
        if !(v.is_empty() || v.len() == flat.len()) {
            return Err(format!(
                "{name} holds {} values for {} weights",
                v.len(),
                flat.len()
            ));
        }
    }
    Ok(Checkpoint {
        step,
        params: template.with_flat(&flat),
        opt,
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

    #[test]
    fn an_edited_header_or_non_finite_state_is_never_trusted() {
        let dir = std::env::temp_dir().join(format!("ferrofit-ckpt-hdr-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = write(&dir, &ckpt(30)).unwrap();
        // Edit the step in the header, same length: the tensors are untouched,
        // so a checksum of the tensors alone (format v1) passed it.
        let mut data = std::fs::read(&path).unwrap();
        let at = data
            .windows(11)
            .position(|w| w == br#""step":"30""#)
            .expect("the step in the header");
        data[at + 8] = b'2';
        std::fs::write(&path, &data).unwrap();
        assert!(
            read(&path).unwrap_err().contains("checksum"),
            "edited header read"
        );
        // Non-finite weights or moments are refused at writing.
        let mut bad = ckpt(40);
        bad.opt.m[3] = f32::INFINITY;
        assert!(matches!(
            write(&dir, &bad),
            Err(FerroError::Diverged { .. })
        ));
        bad = ckpt(40);
        bad.params.layers[0].w[0] = f32::NAN;
        assert!(matches!(
            write(&dir, &bad),
            Err(FerroError::Diverged { .. })
        ));
        // Fields that disagree with the saved configuration are named.
        let mut short = ckpt(50);
        short.opt.m.pop();
        let p = write(&dir, &short).unwrap();
        assert!(
            read(&p).unwrap_err().contains("optim.m holds"),
            "short moments read"
        );
        let mut late = ckpt(50);
        late.step = late.config.steps + 1;
        let p = write(&dir, &late).unwrap();
        assert!(
            read(&p).unwrap_err().contains("outside the run"),
            "step past the end read"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
