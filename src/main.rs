//! The `ferrofit` binary: runs the CLI and turns an error into one line and
//! an exit status (0 ok, 1 the run or a check failed, 2 usage: a flag or an
//! input file, 130 Ctrl-C).

mod cli;

use ferrofit::error::{exit, FerroError};

fn main() {
    ferrofit::backend::guard::install_panic_hook();
    if let Err(e) = cli::run() {
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
