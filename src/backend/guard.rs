//! Backend panics (a lost device, a driver fault) become
//! [`FerroError::BackendFailed`] inside [`guarded`] sections, and the panic
//! hook stays quiet for them: the error says what happened.

use super::select::Target;
use crate::error::{FerroError, Result};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};

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
        Err(FerroError::BackendFailed {
            backend: target.label(),
            detail: detail.trim().to_string(),
        })
    });
    GUARDED_ANYWHERE.fetch_sub(1, Ordering::SeqCst);
    GUARDED.with(|g| g.set(was));
    out
}
