//! The `ferrofit` binary: runs the CLI and turns errors into one line and exit code 2.

fn main() {
    ferrofit::backend::guard::install_panic_hook();
    if let Err(e) = ferrofit::cli::run() {
        // The error and its causes, each said once (ferrofit's messages
        // already quote the cause they wrap).
        let mut line = e.to_string();
        for cause in e.chain().skip(1).map(|c| c.to_string()) {
            if !line.contains(&cause) {
                line = format!("{line}: {cause}");
            }
        }
        eprintln!("error: {line}");
        std::process::exit(2);
    }
}
