//! What the command says besides its result: `-q` keeps stderr to warnings
//! and errors, `-v`/`-vv`/`-vvv` show the libraries' logs (Burn, CubeCL,
//! wgpu: info, debug, trace) and ferrofit's own; `RUST_LOG` overrides the
//! levels as in every Rust tool (`RUST_LOG=wgpu_hal=debug`).

use std::sync::atomic::{AtomicBool, Ordering};

static QUIET: AtomicBool = AtomicBool::new(false);

/// Sets up the logger for `-v` × `verbose`, or `-q`.
pub fn init(verbose: u8, quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
    let level = match (quiet, verbose) {
        (true, _) => "off",
        (false, 0) => "error",
        (false, 1) => "info",
        (false, 2) => "debug",
        _ => "trace",
    };
    let env = env_logger::Env::default().default_filter_or(level);
    // Only the first call wins (tests may call it again).
    let _ = env_logger::Builder::from_env(env)
        .format_timestamp_millis()
        .try_init();
}

/// Whether `-q` asked for silence (progress and notes are left out).
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// A note on stderr (what runs where, what was chosen), left out with `-q`.
macro_rules! note {
    ($($t:tt)*) => {
        if !$crate::cli::log::quiet() {
            eprintln!($($t)*);
        }
    };
}
pub(crate) use note;
