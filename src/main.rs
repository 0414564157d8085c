//! The `ferrofit` binary: runs the CLI and turns errors into one line and exit code 2.

fn main() {
    ferrofit::backend::guard::install_panic_hook();
    if let Err(e) = ferrofit::cli::run() {
        eprintln!("error: {e:#}");
        std::process::exit(2);
    }
}
