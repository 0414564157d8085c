//! Records the resolved Burn and CubeCL versions (from Cargo.lock) so run
//! records state what actually ran, not what was typed into Cargo.toml, and a
//! hash of the GPU kernels' source: the on-disk kernel cache is keyed by it,
//! since CubeCL's cache keys a kernel by its name and comptime arguments, not
//! its body (a rebuilt kernel must never load the old one's PTX).

/// Where the GPU kernels and the comptime values they are compiled for live.
const KERNELS: &str = "src/engine/fused/gpu";

/// FNV-1a over every `.rs` file under `dir`, in path order, names included.
fn source_hash(dir: &std::path::Path, h: &mut u64) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            source_hash(&p, h);
        } else if p.extension().is_some_and(|e| e == "rs") {
            let name = p.to_string_lossy().into_owned().into_bytes();
            for b in name.iter().chain(&std::fs::read(&p).unwrap_or_default()) {
                *h = (*h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
            }
        }
    }
}

fn main() {
    println!("cargo::rerun-if-changed=Cargo.lock");
    println!("cargo::rerun-if-changed={KERNELS}");
    let mut h = 0xcbf2_9ce4_8422_2325_u64;
    source_hash(std::path::Path::new(KERNELS), &mut h);
    println!("cargo::rustc-env=FERROFIT_KERNELS_HASH={h:016x}");
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
