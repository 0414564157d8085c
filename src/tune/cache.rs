//! Tuned winners, kept per device + driver + job in one JSON file (default
//! `$XDG_DATA_HOME/ferrofit/tuned.json`) so `train --tuned` can use them.
//! The file is rewritten atomically; a corrupt one is an error naming the fix.

use super::candidates::Candidate;
use crate::backend::devices::DeviceInfo;
use crate::config::TrainConfig;
use crate::error::{FerroError, Result};
use crate::io::write_atomic;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One cached winner.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The configuration that won.
    pub candidate: Candidate,
    /// Steps the winner took to reach the target (what `train --tuned` runs).
    pub steps: usize,
    /// The loss it had to reach.
    pub target_loss: f64,
    /// The winner's time to target and the job-as-given's, in seconds.
    pub seconds: f64,
    /// The job as given, in seconds (the time it beat).
    pub baseline_seconds: f64,
    /// ferrofit's version that measured it.
    pub ferrofit_version: String,
}

/// The default cache file.
pub fn default_path() -> PathBuf {
    crate::io::data_dir().join("tuned.json")
}

/// The cache key: the device, its driver, and the job's knobs that `tune`
/// does not change (so a different task, size or model is tuned anew).
pub fn key(backend: &str, device: &DeviceInfo, cfg: &TrainConfig) -> String {
    let m = &cfg.model;
    format!(
        "{backend}|{}|{}|{} n={} model={}-{}x{}-{} {:?} {:?} {:?} wd={} {:?} steps={}",
        device.name,
        device.driver,
        cfg.data.name(),
        cfg.n,
        m.inputs,
        m.hidden,
        m.layers,
        m.outputs,
        m.activation,
        cfg.loss,
        cfg.optimizer,
        cfg.weight_decay,
        cfg.schedule,
        cfg.steps
    )
}

/// Every cached entry (none when the file does not exist yet).
pub fn load(path: &Path) -> Result<BTreeMap<String, Entry>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(source) => {
            return Err(FerroError::Io {
                action: "reading",
                path: path.display().to_string(),
                source,
            })
        }
    };
    serde_json::from_str(&text).map_err(|e| FerroError::File {
        path: path.display().to_string(),
        detail: format!("not a ferrofit tune cache ({e}); delete it and run `ferrofit tune` again"),
    })
}

/// Adds or replaces one entry. The read-modify-write holds a lock beside the
/// file, so two `tune` runs finishing together both keep their entries.
pub fn store(path: &Path, key: &str, entry: Entry) -> Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let _held = crate::io::lock(&path.with_file_name(format!(".{name}.lock")), true)?;
    let mut all = load(path)?;
    all.insert(key.to_string(), entry);
    let text = serde_json::to_string_pretty(&all).expect("entries serialise");
    write_atomic(path, text.as_bytes())
}

/// The entry for `key`, or an error saying how to make one.
pub fn lookup(path: &Path, key: &str) -> Result<Entry> {
    load(path)?.remove(key).ok_or_else(|| FerroError::File {
        path: path.display().to_string(),
        detail: format!(
            "no tuned configuration for this job on this device ({key}); run `ferrofit tune` with the same backend and job options first"
        ),
    })
}

/// The job as `train --tuned` runs it: the winner's knobs and step count,
/// stopping at the tuned target loss.
pub fn apply(entry: &Entry, cfg: &TrainConfig) -> TrainConfig {
    let mut out = entry.candidate.apply(cfg);
    out.steps = entry.steps.max(1);
    out.run.target_loss = cfg.run.target_loss.or(Some(entry.target_loss));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{EngineKind, Precision};

    fn entry() -> Entry {
        Entry {
            candidate: Candidate {
                engine: EngineKind::Fused,
                precision: Precision::F32,
                batch_size: Some(4096),
                accumulate: 1,
                lr: 0.4,
                points_per_unit: Some(8),
                persistent: true,
                lanes: None,
                tiled_threads: None,
            },
            steps: 250,
            target_loss: 0.015,
            seconds: 0.1,
            baseline_seconds: 0.9,
            ferrofit_version: "test".into(),
        }
    }

    #[test]
    fn stores_looks_up_and_rejects_a_corrupt_file() {
        let dir = std::env::temp_dir().join(format!("ferrofit-tune-{}", std::process::id()));
        let path = dir.join("tuned.json");
        let _ = std::fs::remove_file(&path);
        assert!(lookup(&path, "k")
            .unwrap_err()
            .to_string()
            .contains("run `ferrofit tune`"));
        store(&path, "k", entry()).unwrap();
        store(&path, "other", entry()).unwrap();
        assert_eq!(lookup(&path, "k").unwrap(), entry());
        let cfg = apply(&entry(), &TrainConfig::default());
        assert_eq!(
            (
                cfg.batch_size,
                cfg.lr,
                cfg.steps,
                cfg.run.target_loss,
                cfg.kernel.points_per_unit
            ),
            (Some(4096), 0.4, 250, Some(0.015), Some(8))
        );
        std::fs::write(&path, "{ not json").unwrap();
        let e = lookup(&path, "k").unwrap_err().to_string();
        assert!(e.contains("delete it"), "{e}");
    }

    #[test]
    fn concurrent_writers_keep_every_entry() {
        let dir = std::env::temp_dir().join(format!("ferrofit-tune-race-{}", std::process::id()));
        let path = dir.join("tuned.json");
        let _ = std::fs::remove_dir_all(&dir);
        std::thread::scope(|s| {
            for w in 0..8 {
                let path = &path;
                s.spawn(move || {
                    for i in 0..10 {
                        store(path, &format!("w{w}-{i}"), entry()).unwrap();
                    }
                });
            }
        });
        assert_eq!(load(&path).unwrap().len(), 80, "entries were lost");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
