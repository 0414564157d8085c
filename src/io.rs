//! Files that survive crashes: every write goes to a temporary file in the same
//! folder, is flushed to disk, then renamed over the target.

use crate::error::{FerroError, Result};
use std::io::Write;
use std::path::{Path, PathBuf};

/// ferrofit's folder for data it keeps between runs (bench history, tuned
/// configurations): `$XDG_DATA_HOME/ferrofit`, else `~/.local/share/ferrofit`.
pub fn data_dir() -> PathBuf {
    std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(std::env::temp_dir)
        .join("ferrofit")
}

/// Writes `bytes` to `path` atomically (temp file, fsync, rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let io = |action: &'static str, p: &Path| {
        let p = p.display().to_string();
        move |source| FerroError::Io {
            action,
            path: p,
            source,
        }
    };
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io("creating folder", dir))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    let mut f = std::fs::File::create(&tmp).map_err(io("creating", &tmp))?;
    f.write_all(bytes).map_err(io("writing", &tmp))?;
    f.sync_all().map_err(io("syncing", &tmp))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(io("renaming into", path))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let dir = std::env::temp_dir().join(format!("ferrofit-io-{}", std::process::id()));
        let p = dir.join("a.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
