//! Files that survive crashes: every write goes to a temporary file in the same
//! folder, is flushed to disk, then renamed over the target.

use crate::error::{FerroError, Result};
use std::io::Write;
use std::path::{Path, PathBuf};

/// ferrofit's folder for data it keeps between runs (bench history, tuned
/// configurations): `$XDG_DATA_HOME/ferrofit`, else `~/.local/share/ferrofit`.
pub fn data_dir() -> PathBuf {
    xdg("XDG_DATA_HOME", ".local/share")
}

/// ferrofit's folder for what can be rebuilt (compiled kernels):
/// `FERROFIT_CACHE_DIR`, else `$XDG_CACHE_HOME/ferrofit`, else `~/.cache/ferrofit`.
pub fn cache_dir() -> PathBuf {
    match std::env::var_os("FERROFIT_CACHE_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => xdg("XDG_CACHE_HOME", ".cache"),
    }
}

/// `$VAR/ferrofit`, else `$HOME/HOME_REL/ferrofit` (the XDG base directories).
fn xdg(var: &str, home_rel: &str) -> PathBuf {
    std::env::var_os(var)
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(home_rel)))
        .unwrap_or_else(std::env::temp_dir)
        .join("ferrofit")
}

pub use ferrofit_spec::files::fnv1a;

/// An I/O error's mapping to [`FerroError::Io`] with what was done to `p`.
fn io(action: &'static str, p: &Path) -> impl FnOnce(std::io::Error) -> FerroError {
    let path = p.display().to_string();
    move |source| FerroError::Io {
        action,
        path,
        source,
    }
}

/// Writes `bytes` to `path` atomically (temp file, fsync, rename, folder
/// fsync). On failure (a full disk, a read-only folder) the temporary file is
/// removed and `path` is as it was.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io("creating folder", dir))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    // One temporary name per write, so two threads never share one.
    static WRITES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let nth = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.tmp{}-{nth}", std::process::id()));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp).map_err(io("creating", &tmp))?;
        f.write_all(bytes).map_err(io("writing", &tmp))?;
        f.sync_all().map_err(io("syncing", &tmp))?;
        drop(f);
        std::fs::rename(&tmp, path).map_err(io("renaming into", path))
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    // The rename itself survives a power cut once the folder is synced.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// An advisory lock (`flock`) on the file at `path`, created if absent, held
/// until the returned file is dropped — or the process ends, kill -9
/// included. `wait`: block until it is free; else `None` when another
/// process holds it.
pub fn lock(path: &Path, wait: bool) -> Result<Option<std::fs::File>> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io("creating folder for", path))?;
    }
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(io("creating", path))?;
    let mode = if wait {
        libc::LOCK_EX
    } else {
        libc::LOCK_EX | libc::LOCK_NB
    };
    // SAFETY: flock on a file descriptor this function owns.
    let taken = unsafe {
        use std::os::fd::AsRawFd;
        libc::flock(f.as_raw_fd(), mode) == 0
    };
    Ok(taken.then_some(f))
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
