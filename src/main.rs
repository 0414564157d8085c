//! The `ferrofit` binary: runs the CLI and turns an error into one line and
//! an exit status (0 ok, 1 the run or a check failed, 2 usage: a flag or an
//! input file, 130 Ctrl-C).

mod cli;

use ferrofit::error::{exit, FerroError};

fn main() {
    let started = std::time::Instant::now();
    ferrofit::backend::guard::install_panic_hook();
    let done = cli::run();
    // What the process spends after this (the drivers' teardown) is the rest
    // of its wall time (docs/PERFORMANCE.md, "Start-up").
    log::debug!(
        "command done {:.3} s after main started",
        started.elapsed().as_secs_f64()
    );
    if let Err(e) = done {
        // The error and its causes, each said once (ferrofit's messages
        // already quote the cause they wrap).
        let mut line = e.to_string();
        for cause in e.chain().skip(1).map(|c| c.to_string()) {
            if !line.contains(&cause) {
                line = format!("{line}: {cause}");
            }
        }
        eprintln!("error: {line}");
        let code = e
            .chain()
            .find_map(|c| c.downcast_ref::<FerroError>())
            .map_or(exit::FAILED, FerroError::exit_code);
        std::process::exit(code);
    }
}
