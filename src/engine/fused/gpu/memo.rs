//! What the fused GPU engine measured about its device, kept between runs:
//! today the persistent kernel's largest co-resident grid, whose probe
//! (launches on 1, 2, 4, … cubes) cost 50 ms of every CUDA run's start on the
//! H200 (docs/PERFORMANCE.md, "Start-up").
//!
//! The values live in one small file of a folder the caller hands over — the
//! kernel cache's, which is already keyed by device, driver and build, held
//! by one process at a time and sealed (a damaged folder is emptied before it
//! is read). Without a folder (the cache off, held by another run, or a
//! backend without one) nothing is kept and the engine measures again.

use crate::io::write_atomic;
use std::path::PathBuf;

/// The file of remembered values in the folder: one `key value` a line.
const FILE: &str = "measured";

/// Where the engine keeps what it measured (nowhere, without a folder).
#[derive(Clone, Debug, Default)]
pub struct Memo {
    dir: Option<PathBuf>,
}

impl Memo {
    /// Values kept in `dir` (a folder this process alone writes to), or
    /// nowhere.
    pub fn at(dir: Option<PathBuf>) -> Memo {
        Memo { dir }
    }

    /// The value remembered under `key`.
    pub fn recall(&self, key: &str) -> Option<String> {
        let text = std::fs::read_to_string(self.dir.as_ref()?.join(FILE)).ok()?;
        text.lines()
            .filter_map(|l| l.split_once(' '))
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.to_string())
    }

    /// Remembers `value` under `key` (a word, no spaces), replacing what was
    /// there. A failed write is only logged: the next run measures again.
    pub fn remember(&self, key: &str, value: &str) {
        let Some(dir) = &self.dir else { return };
        let path = dir.join(FILE);
        let old = std::fs::read_to_string(&path).unwrap_or_default();
        let mut text: String = old
            .lines()
            .filter(|l| l.split_once(' ').is_none_or(|(k, _)| k != key))
            .map(|l| format!("{l}\n"))
            .collect();
        text.push_str(&format!("{key} {value}\n"));
        if let Err(e) = write_atomic(&path, text.as_bytes()) {
            log::warn!("could not keep {key} in {}: {e}", path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_come_back_by_key_and_replace_their_old_ones() {
        let dir = std::env::temp_dir().join(format!("ferrofit-memo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let m = Memo::at(Some(dir.clone()));
        assert_eq!(m.recall("grid-a"), None);
        m.remember("grid-a", "512");
        m.remember("grid-b", "none");
        m.remember("grid-a", "1024");
        assert_eq!(m.recall("grid-a").as_deref(), Some("1024"));
        assert_eq!(m.recall("grid-b").as_deref(), Some("none"));
        // Nowhere to keep them: nothing comes back.
        let nowhere = Memo::default();
        nowhere.remember("grid-a", "1");
        assert_eq!(nowhere.recall("grid-a"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
