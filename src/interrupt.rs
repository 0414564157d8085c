//! Ctrl-C: the first SIGINT asks a checkpointing run to stop after the current
//! step (writing a checkpoint first); a second one ends the process at once.

use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    if REQUESTED.swap(true, Ordering::SeqCst) {
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(crate::error::exit::INTERRUPTED) };
    }
}

/// Routes SIGINT to [`requested`] (only runs that write checkpoints call this).
pub fn install() {
    // SAFETY: the handler only touches an atomic and calls _exit.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
}

/// Whether Ctrl-C was pressed since [`install`].
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}
