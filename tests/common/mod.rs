//! Shared test helpers: the devices to test on, one per compiled backend.
//!
//! The CPU is always tested. A wgpu device (lavapipe in CI) is tested when one
//! is found; with `FERROFIT_REQUIRE_WGPU=1` (set by `.ci/run`) its absence is a
//! failure rather than a skip; `FERROFIT_REQUIRE_CUDA=1` does the same for CUDA.
#![allow(dead_code, unused_macros)]

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
    Trainer::new(cfg.clone(), target.clone())
        .engine(engine)
        .init(init)
        .data(data)
        .run()
}

/// The three kinds of device a test can run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Cpu,
    Wgpu,
    Cuda,
}

impl Kind {
    fn request(self) -> BackendKind {
        match self {
            Kind::Cpu => BackendKind::Cpu,
            Kind::Wgpu => BackendKind::Wgpu,
            Kind::Cuda => BackendKind::Cuda,
        }
    }

    /// The variable that makes this kind's absence a failure.
    fn required_by(self) -> Option<&'static str> {
        match self {
            Kind::Cpu => None,
            Kind::Wgpu => Some("FERROFIT_REQUIRE_WGPU"),
            Kind::Cuda => Some("FERROFIT_REQUIRE_CUDA"),
        }
    }
}

fn inventory() -> &'static Inventory {
    static INV: std::sync::OnceLock<Inventory> = std::sync::OnceLock::new();
    INV.get_or_init(Inventory::probe)
}

/// The first device of `kind`, or `None` after recording `test` as skipped:
/// a line on stderr and, when `FERROFIT_SKIP_LOG` names a file (`.ci/test.sh`
/// sets it), a line there, so the run's summary counts it as skipped, not
/// passed. With the kind's `FERROFIT_REQUIRE_*=1`, absence is a failure.
pub fn device(kind: Kind, test: &str) -> Option<Target> {
    match find(kind) {
        Ok(t) => Some(t),
        Err(e) => {
            skip(test, &format!("no {kind:?} device ({e})"));
            None
        }
    }
}

/// Records `test` as skipped for `why` (stderr, and the skip log when set).
pub fn skip(test: &str, why: &str) {
    eprintln!("skipped {test}: {why}");
    if let Ok(path) = std::env::var("FERROFIT_SKIP_LOG") {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("the skip log opens");
        // One write a line: tests run in parallel, and `writeln!` may write
        // the name and its newline apart, so two skips ran into one line
        // (and `.ci/test.sh` counted one skip fewer).
        f.write_all(format!("{test}\n").as_bytes())
            .expect("the skip log takes a line");
    }
}

/// The first device of `kind`; panics when it is absent but required.
fn find(kind: Kind) -> ferrofit::Result<Target> {
    let found = select(inventory(), kind.request(), None);
    if let (Err(e), Some(var)) = (&found, kind.required_by()) {
        if std::env::var(var).is_ok_and(|v| v == "1") {
            panic!("{var}=1 but no {kind:?} device: {e}");
        }
    }
    found
}

/// One test per device kind: `per_device! { fn name(t) { ... } }` makes the
/// tests `name::cpu`, `name::wgpu` and `name::cuda`, each running the body with
/// `t: &Target` of that kind, or recorded as skipped when there is none
/// ([`device`]). `per_gpu!` makes only `wgpu` and `cuda`.
macro_rules! per_device {
    ($(fn $name:ident($t:ident) $body:block)*) => {$(
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            fn body($t: &ferrofit::backend::select::Target) $body
            $crate::common::device_case!(cpu, Cpu, body);
            $crate::common::device_case!(wgpu, Wgpu, body);
            $crate::common::device_case!(cuda, Cuda, body);
        }
    )*};
}

/// [`per_device!`] without the CPU.
macro_rules! per_gpu {
    ($(fn $name:ident($t:ident) $body:block)*) => {$(
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            fn body($t: &ferrofit::backend::select::Target) $body
            $crate::common::device_case!(wgpu, Wgpu, body);
            $crate::common::device_case!(cuda, Cuda, body);
        }
    )*};
}

macro_rules! device_case {
    ($test:ident, $kind:ident, $body:ident) => {
        #[test]
        fn $test() {
            let name = concat!(module_path!(), "::", stringify!($test));
            if let Some(t) = $crate::common::device($crate::common::Kind::$kind, name) {
                eprintln!("testing on {} ({})", t.label(), t.info.name);
                $body(&t);
            }
        }
    };
}

#[allow(unused_imports)]
pub(crate) use {device_case, per_device, per_gpu};

/// The CPU, the device every test run has.
pub fn cpu() -> Target {
    select(inventory(), BackendKind::Cpu, None).expect("the CPU is always there")
}

/// Every device kind this run has, for tests over all of them at once (a
/// bench table, the doctor); a required kind that is absent fails.
pub fn targets() -> Vec<Target> {
    [Kind::Cpu, Kind::Wgpu, Kind::Cuda]
        .into_iter()
        .filter_map(|k| find(k).ok())
        .collect()
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

/// `ferrofit train --backend cpu --n N --steps S` and `more` arguments.
#[allow(dead_code)]
pub fn train_cpu(n: &str, steps: &str, more: &[&str]) -> (i32, String, String) {
    let job = ["train", "--backend", "cpu", "--n", n, "--steps", steps];
    ferrofit(&[&job[..], more].concat())
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

/// Random inputs and targets in [-1, 1], `n` points (the gradient tests' data).
#[allow(dead_code)]
pub fn random_data(n: usize, inputs: usize, outputs: usize, seed: u64) -> ferrofit::task::Dataset {
    let draw = |s: u64, i: usize| (2.0 * ferrofit::rng::uniform(seed, s, i as u64) - 1.0) as f32;
    ferrofit::task::Dataset {
        x: (0..n * inputs).map(|i| draw(7, i)).collect(),
        y: (0..n * outputs).map(|i| draw(8, i)).collect(),
        inputs,
        outputs,
    }
}

/// `engine`'s gradient on `target` at `p` over `batch` of `data`.
pub fn gradient(
    target: &Target,
    cfg: &TrainConfig,
    engine: EngineKind,
    p: &Params,
    data: &Dataset,
    batch: &ferrofit::batches::Batch,
) -> Vec<f32> {
    Trainer::new(cfg.clone(), target.clone())
        .engine(engine)
        .init(p.clone())
        .data(data.clone())
        .gradient(batch)
        .unwrap_or_else(|e| panic!("{} {engine:?} gradient: {e}", target.label()))
}
