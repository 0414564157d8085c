//! Panics inside [`guarded`] sections become errors, and the panic hook stays
//! quiet for them: the error says what happened. A panic in a dependency (a
//! lost device, a driver fault, a runtime's own check) is
//! [`FerroError::BackendFailed`]; one in ferrofit's own code is
//! [`FerroError::Bug`], with where it happened — never advice about memory.

use super::select::Target;
use crate::error::{FerroError, Result};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Where the latest panic happened (`file:line`), as the hook saw it.
static LAST_PANIC_AT: Mutex<Option<String>> = Mutex::new(None);

thread_local! {
    /// True while this thread runs backend code whose panics become errors.
    static GUARDED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Guarded sections running on any thread. While one runs, a panic on a
/// backend's own worker thread (CubeCL's device threads) surfaces as that
/// section's error, so its default report is not printed either.
static GUARDED_ANYWHERE: AtomicUsize = AtomicUsize::new(0);

/// Installs a panic hook that stays quiet for panics [`guarded`] turns into
/// errors and prints all others as usual.
pub fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if let (Some(l), Ok(mut at)) = (info.location(), LAST_PANIC_AT.lock()) {
            *at = Some(format!("{}:{}", l.file(), l.line()));
        }
        let worker = std::thread::current().name() != Some("main")
            && GUARDED_ANYWHERE.load(Ordering::SeqCst) > 0;
        if !(GUARDED.with(|g| g.get()) || worker) {
            default(info);
        }
    }));
}

/// Runs `f`, turning a backend panic into an error.
pub fn guarded<T>(target: &Target, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let was = GUARDED.with(|g| g.replace(true));
    GUARDED_ANYWHERE.fetch_add(1, Ordering::SeqCst);
    let out = catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let detail = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "unknown panic".into());
        let at = LAST_PANIC_AT
            .lock()
            .ok()
            .and_then(|mut a| a.take())
            .unwrap_or_default();
        let detail = detail.trim().to_string();
        if is_own(&at) {
            Err(FerroError::Bug {
                detail,
                location: at,
            })
        } else {
            Err(FerroError::BackendFailed {
                backend: target.label(),
                detail,
            })
        }
    });
    GUARDED_ANYWHERE.fetch_sub(1, Ordering::SeqCst);
    GUARDED.with(|g| g.set(was));
    out
}

/// Whether a panic at `file:line` is in ferrofit's own sources: they compile
/// with paths relative to the workspace (`src/…`, `crates/…`), dependencies
/// with the absolute paths of the registry.
fn is_own(at: &str) -> bool {
    at.starts_with("src/") || at.starts_with("crates/ferrofit")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_are_told_apart_by_where_they_happen() {
        assert!(is_own("src/engine/run.rs:12"));
        assert!(!is_own(
            "/root/.cargo/registry/src/index/cubecl-core-0.10.0/src/a.rs:3"
        ));
    }
}
