//! The on-disk kernel cache: compiled GPU kernels kept between runs, so a
//! second `ferrofit train` skips NVRTC (≈ 0.3 s per kernel variant).
//!
//! CubeCL's own compilation cache does the storing (PTX for CUDA; the SPIR-V
//! compiler's entries where that compiler runs); this module decides where it
//! lives and makes it safe to trust:
//! - **keyed** by ferrofit's version, a hash of the kernels' source (CubeCL
//!   keys an entry by the kernel's name and comptime arguments, not its body:
//!   without it a rebuilt kernel would load the old one's PTX), the device's
//!   name and its driver: a folder per key, so a driver update, another GPU
//!   model or another build never reads kernels built for something else;
//! - **one writer**: a process takes the folder's lock for its lifetime; a
//!   second concurrent run compiles without the cache rather than share it;
//! - **sealed**: at a clean exit the folder's files are listed with their
//!   sizes and checksums (`seal`); at the next start a folder that does not
//!   match its seal (a crash mid-write, a damaged disk, an edit) is removed
//!   and rebuilt, never read.
//!
//! `FERROFIT_CACHE_DIR` moves the cache (default `$XDG_CACHE_HOME/ferrofit`
//! or `~/.cache/ferrofit`), `FERROFIT_KERNEL_CACHE=off` turns it off, and
//! `ferrofit cache` shows or clears it. Burn's autotune results go to the same
//! root instead of a `target/` folder near the working directory.

use super::device::Api;
use super::devices::DeviceInfo;
use crate::io::{self, fnv1a};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// The file that lists a cache folder's contents at its last clean exit.
const SEAL: &str = "seal";
/// The file whose lock marks the folder's one writer.
const LOCK: &str = "lock";

/// The cache's root folder ([`io::cache_dir`]).
pub fn root() -> PathBuf {
    io::cache_dir()
}

/// Whether `FERROFIT_KERNEL_CACHE` leaves the cache on (anything but `off`/`0`).
pub fn wanted() -> bool {
    !matches!(
        std::env::var("FERROFIT_KERNEL_CACHE").as_deref(),
        Ok("off" | "0" | "false")
    )
}

/// The folder of one key: ferrofit's version, the kernels' source hash, the
/// device's name and driver.
pub fn folder(root: &Path, device: &DeviceInfo) -> PathBuf {
    let slug = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect()
    };
    root.join("kernels").join(format!(
        "ferrofit-{}-{}-{}-driver-{}",
        env!("CARGO_PKG_VERSION"),
        &env!("FERROFIT_KERNELS_HASH")[..8],
        slug(&device.name),
        slug(&device.driver)
    ))
}

/// The cache this process writes, once [`enable`] has taken it.
static TAKEN: Mutex<Option<(PathBuf, std::fs::File)>> = Mutex::new(None);
static ENABLED: OnceLock<Option<PathBuf>> = OnceLock::new();

/// Whether CubeCL keeps compiled kernels on disk for devices of `api`: PTX
/// for CUDA, SPIR-V where its SPIR-V compiler runs (WGSL has no cache).
fn caches(api: Api) -> bool {
    api == Api::Cuda || api.spirv()
}

/// Points CubeCL's compilation cache at `device`'s folder, once per process
/// and before any GPU runtime starts (CubeCL takes one folder a process), and
/// returns that folder to the devices it belongs to: a second device of
/// another model or API in the same run (`bench --backends cuda,vulkan`) gets
/// `None`, so what an engine remembers there ([`crate::engine::fused::gpu::memo`])
/// is never read for another device. CUDA devices use it (CubeCL caches PTX),
/// and Vulkan devices where CubeCL's SPIR-V compiler runs (it caches SPIR-V;
/// the WGSL path has no cache). `None` also: off, another process holds the
/// folder, or the runtime was configured already (then CubeCL's own settings
/// stand).
pub fn enable(device: &DeviceInfo) -> Option<PathBuf> {
    ENABLED
        .get_or_init(|| {
            if !caches(device.api) || !wanted() {
                return None;
            }
            let dir = folder(&root(), device);
            match take(&dir) {
                Ok(Some(lock)) if configure(&root(), &dir) => {
                    *TAKEN.lock().unwrap_or_else(|e| e.into_inner()) = Some((dir.clone(), lock));
                    // SAFETY: registers a plain extern "C" function with no captured state.
                    unsafe { libc::atexit(seal_at_exit) };
                    Some(dir)
                }
                Ok(Some(_)) => None,
                Ok(None) => {
                    log::info!(
                        "kernel cache {} is in use by another run: compiling without it",
                        dir.display()
                    );
                    None
                }
                Err(e) => {
                    log::warn!("kernel cache off: {e}");
                    None
                }
            }
        })
        .clone()
        .filter(|dir| *dir == folder(&root(), device))
}

/// Takes the folder's lock and checks its seal; a folder that fails the
/// check is emptied first.
fn take(dir: &Path) -> crate::Result<Option<std::fs::File>> {
    let Some(lock) = io::lock(&dir.join(LOCK), false)? else {
        return Ok(None);
    };
    if let Err(why) = check(dir) {
        log::warn!("kernel cache {} {why}: rebuilding it", dir.display());
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if e.file_name() != LOCK {
                let p = e.path();
                let _ = if p.is_dir() {
                    std::fs::remove_dir_all(&p)
                } else {
                    std::fs::remove_file(&p)
                };
            }
        }
    }
    Ok(Some(lock))
}

/// Installs the cache folders in CubeCL's configuration; `false` when the
/// configuration was read or set already.
fn configure(root: &Path, dir: &Path) -> bool {
    use cubecl::config::{cache::CacheConfig, CubeClRuntimeConfig, RuntimeConfig};
    let mut state = CubeClRuntimeConfig::storage().lock();
    if state.is_some() {
        return false;
    }
    // A user's cubecl.toml and CUBECL_* variables still apply.
    let mut cfg = CubeClRuntimeConfig::from_current_dir().override_from_env();
    if cfg.compilation.cache.is_none() {
        cfg.compilation.cache = Some(CacheConfig::File(dir.to_path_buf()));
    }
    if matches!(cfg.autotune.cache, CacheConfig::Target) {
        cfg.autotune.cache = CacheConfig::File(root.join("autotune"));
    }
    *state = Some(std::sync::Arc::new(cfg));
    true
}

/// The seal's text for the folder as it is now: one `path size checksum`
/// line per file, sorted.
fn listing(dir: &Path) -> String {
    let mut lines = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            let rel = p
                .strip_prefix(dir)
                .unwrap_or(&p)
                .to_string_lossy()
                .to_string();
            if p.is_dir() {
                stack.push(p);
            } else if rel != SEAL && rel != LOCK {
                let bytes = std::fs::read(&p).unwrap_or_default();
                lines.push(format!("{rel} {} {:016x}", bytes.len(), fnv1a(&[&bytes])));
            }
        }
    }
    lines.sort();
    lines.join("\n")
}

/// `Ok` when the folder matches its seal or holds nothing yet.
pub fn check(dir: &Path) -> std::result::Result<(), &'static str> {
    check_listing(dir, &listing(dir))
}

/// [`check`] with the folder's [`listing`] already made.
fn check_listing(dir: &Path, now: &str) -> std::result::Result<(), &'static str> {
    match std::fs::read_to_string(dir.join(SEAL)) {
        Ok(seal) if seal == now => Ok(()),
        Ok(_) => Err("does not match its seal (damaged or left by a crash)"),
        Err(_) if now.is_empty() => Ok(()),
        Err(_) => Err("has no seal (left by a crash)"),
    }
}

/// Writes the seal of the folder this process holds (at a clean exit),
/// unless the folder still matches the one it has (a run that compiled
/// nothing new writes nothing).
pub fn seal() {
    let taken = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((dir, _)) = taken.as_ref() {
        let now = listing(dir);
        if std::fs::read_to_string(dir.join(SEAL)).is_ok_and(|s| s == now) {
            return;
        }
        if let Err(e) = io::write_atomic(&dir.join(SEAL), now.as_bytes()) {
            log::warn!("kernel cache not sealed (it will be rebuilt): {e}");
        }
    }
}

extern "C" fn seal_at_exit() {
    seal();
}

/// What `ferrofit cache` and `doctor` show: each key's folder, its size and
/// whether it matches its seal.
pub fn describe(root: &Path) -> Vec<(String, u64, std::result::Result<(), &'static str>)> {
    let mut out = vec![];
    for e in std::fs::read_dir(root.join("kernels"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let dir = e.path();
        let now = listing(&dir);
        let size = now
            .lines()
            .filter_map(|l| l.split(' ').nth(1)?.parse::<u64>().ok())
            .sum();
        out.push((
            e.file_name().to_string_lossy().to_string(),
            size,
            check_listing(&dir, &now),
        ));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Removes every key's folder that no running process holds; returns the
/// folders removed and those left because a run is using them.
pub fn clear(root: &Path) -> crate::Result<(Vec<String>, Vec<String>)> {
    let (mut removed, mut busy) = (vec![], vec![]);
    for e in std::fs::read_dir(root.join("kernels"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let dir = e.path();
        let name = e.file_name().to_string_lossy().to_string();
        match io::lock(&dir.join(LOCK), false)? {
            Some(_held) => {
                std::fs::remove_dir_all(&dir).map_err(|source| crate::FerroError::Io {
                    action: "removing",
                    path: dir.display().to_string(),
                    source,
                })?;
                removed.push(name);
            }
            None => busy.push(name),
        }
    }
    Ok((removed, busy))
}

/// One line for `doctor`: where the cache is, how much it holds, whether it is intact.
pub fn summary() -> String {
    let root = root();
    let kernels = root.join("kernels");
    if !wanted() {
        return format!("{} — off (FERROFIT_KERNEL_CACHE)", kernels.display());
    }
    // The folder this process holds is sealed at exit; what this run compiled
    // into it (doctor's own checks) would read as damaged until then.
    seal();
    let folders = describe(&root);
    let bytes: u64 = folders.iter().map(|f| f.1).sum();
    let damaged = folders.iter().filter(|f| f.2.is_err()).count();
    let health = match damaged {
        0 => "intact".to_string(),
        n => format!("{n} damaged, rebuilt at their next use"),
    };
    format!(
        "{} — {} device folder(s), {:.1} KiB, {health} (`ferrofit cache --clear` empties it)",
        kernels.display(),
        folders.len(),
        bytes as f64 / 1024.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ferrofit-kc-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("ptx")).unwrap();
        d
    }

    #[test]
    fn a_damaged_or_unsealed_folder_is_emptied_and_a_sealed_one_kept() {
        let d = scratch("seal");
        assert!(check(&d).is_ok(), "an empty folder is fine");
        std::fs::write(d.join("ptx/chunk0.cbor"), b"kernel").unwrap();
        assert_eq!(check(&d), Err("has no seal (left by a crash)"));
        io::write_atomic(&d.join(SEAL), listing(&d).as_bytes()).unwrap();
        assert!(check(&d).is_ok());
        let lock = take(&d).unwrap().expect("free");
        assert!(
            d.join("ptx/chunk0.cbor").exists(),
            "sealed entries are kept"
        );
        assert!(take(&d).unwrap().is_none(), "one writer at a time");
        drop(lock);
        std::fs::write(d.join("ptx/chunk0.cbor"), b"kernEl").unwrap();
        assert!(check(&d).is_err(), "same size, other bytes");
        take(&d).unwrap().expect("free");
        assert!(
            !d.join("ptx").exists() && !d.join(SEAL).exists(),
            "damaged folder emptied"
        );
        std::fs::remove_dir_all(d).unwrap();
    }
}
