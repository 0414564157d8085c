//! Records the resolved Burn and CubeCL versions (from Cargo.lock) so run
//! records state what actually ran, not what was typed into Cargo.toml.

fn main() {
    println!("cargo::rerun-if-changed=Cargo.lock");
    let lock = std::fs::read_to_string("Cargo.lock").unwrap_or_default();
    for (krate, var) in [
        ("burn", "FERROFIT_BURN_VERSION"),
        ("cubecl", "FERROFIT_CUBECL_VERSION"),
    ] {
        let version = lock
            .split("[[package]]")
            .find(|p| p.lines().any(|l| l.trim() == format!("name = \"{krate}\"")))
            .and_then(|p| {
                p.lines().find_map(|l| {
                    l.trim()
                        .strip_prefix("version = \"")?
                        .strip_suffix('"')
                        .map(str::to_string)
                })
            })
            .unwrap_or_else(|| "unknown".into());
        println!("cargo::rustc-env={var}={version}");
    }
}
