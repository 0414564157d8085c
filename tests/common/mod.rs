//! Shared test helpers: the devices to test on, one per compiled backend.
//!
//! The CPU is always tested. A wgpu device (lavapipe in CI) is tested when one
//! is found; with `FERROFIT_REQUIRE_WGPU=1` (set by `.ci/run`) its absence is a
//! failure rather than a skip; `FERROFIT_REQUIRE_CUDA=1` does the same for CUDA.
#![allow(dead_code)]

use ferrofit::backend::devices::Inventory;
use ferrofit::backend::select::{select, Target};
use ferrofit::backend::BackendKind;
use ferrofit::config::{EngineKind, TrainConfig};
use ferrofit::model::Params;
use ferrofit::task::Dataset;
use ferrofit::trainer::{RunResult, Trainer};

/// Trains `cfg` on `target` from `init`, on `data` when given.
pub fn train_from(
    target: &Target,
    cfg: &TrainConfig,
    engine: EngineKind,
    init: Params,
    data: Option<Dataset>,
) -> ferrofit::Result<RunResult> {
    let t = Trainer::new(cfg.clone(), target.clone())
        .engine(engine)
        .init(init);
    match data {
        Some(d) => t.data(d).run(),
        None => t.run(),
    }
}

/// Every backend this test run must cover.
pub fn targets() -> Vec<Target> {
    let inv = Inventory::probe();
    let mut t = vec![select(&inv, BackendKind::Cpu, None).expect("the CPU is always there")];
    match select(&inv, BackendKind::Wgpu, None) {
        Ok(w) => t.push(w),
        Err(e) if std::env::var("FERROFIT_REQUIRE_WGPU").is_ok_and(|v| v == "1") => {
            panic!("FERROFIT_REQUIRE_WGPU=1 but no wgpu device: {e} (run .ci/install-lavapipe.sh)")
        }
        Err(e) => eprintln!("skipping wgpu: {e}"),
    }
    match select(&inv, BackendKind::Cuda, None) {
        Ok(c) => t.push(c),
        Err(e) if std::env::var("FERROFIT_REQUIRE_CUDA").is_ok_and(|v| v == "1") => {
            panic!("FERROFIT_REQUIRE_CUDA=1 but no CUDA device: {e}")
        }
        Err(_) => {}
    }
    let names: Vec<String> = t
        .iter()
        .map(|t| format!("{} ({})", t.label(), t.info.name))
        .collect();
    eprintln!("testing on: {}", names.join(", "));
    t
}

/// Runs the `ferrofit` binary; returns exit code, stdout and stderr.
pub fn ferrofit(args: &[&str]) -> (i32, String, String) {
    let out = bin().args(args).output().expect("the binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// The `ferrofit` binary as a command, for tests that need more control.
pub fn bin() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_ferrofit"))
}

/// An empty folder for one test under the target folder (kept for a person to look at).
pub fn fresh_dir(tag: &str) -> std::path::PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(tag);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
