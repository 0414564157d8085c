//! The README's Usage block, run as written: every `ferrofit …` line that
//! runs on the CPU (in a scratch folder holding the Palmer penguins CSV the
//! lines name), in order, through `sh` with the built binary first on PATH,
//! must exit 0. Lines that are not literal (`[--json]`, `...`) or need a GPU,
//! a peer framework or a minute of tuning are listed as not run, with why —
//! so the README cannot drift from the commands it shows.

mod common;

use std::path::Path;

/// Why a README line is not run here, or `None` to run it.
fn not_run(line: &str) -> Option<&'static str> {
    let lower = line.to_lowercase();
    if line.contains('[') || line.contains("...") {
        Some("a pattern, not a literal command")
    } else if ["cuda", "vulkan", "tensor cores"]
        .iter()
        .any(|w| lower.contains(w))
    {
        Some("needs a GPU")
    } else if line.contains("--peers") {
        Some("needs PyTorch/JAX")
    } else {
        None
    }
}

/// The Usage block's commands, continuation lines joined.
fn commands(readme: &str) -> Vec<String> {
    let usage = readme.split("## Usage").nth(1).expect("a Usage section");
    let block = usage
        .split("```sh")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a sh block");
    let mut out: Vec<String> = Vec::new();
    let mut joined = String::new();
    for line in block.lines() {
        let t = line.trim();
        if let Some(part) = t.strip_suffix('\\') {
            joined += part;
            continue;
        }
        joined += t;
        if joined.starts_with("ferrofit ") {
            out.push(std::mem::take(&mut joined));
        }
        joined.clear();
    }
    out
}

#[test]
fn every_usage_line_that_runs_on_the_cpu_runs_as_written() {
    let Ok(csv) = std::env::var("FERROFIT_PENGUINS") else {
        common::skip(
            "every_usage_line_that_runs_on_the_cpu_runs_as_written",
            "FERROFIT_PENGUINS is not set (the lines train on penguins.csv; .ci/test.sh fetches it)",
        );
        return;
    };
    let dir = common::fresh_dir("readme");
    std::fs::copy(&csv, dir.join("penguins.csv")).unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_ferrofit"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let lines = commands(&readme);
    assert!(lines.len() >= 15, "{lines:?}");
    let mut ran = 0;
    for line in &lines {
        if let Some(why) = not_run(line) {
            eprintln!("not run ({why}): {line}");
            continue;
        }
        let out = std::process::Command::new("sh")
            .args(["-c", line])
            .current_dir(&dir)
            .env("PATH", &path)
            .env("HOME", &dir)
            .env("XDG_DATA_HOME", dir.join("data"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "`{line}` exited {:?}:\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        ran += 1;
    }
    assert!(ran >= 9, "only {ran} lines ran");
    for made in [
        "runs/sin/model.safetensors",
        "pred.csv",
        "runs/mass2/run.json",
        "ferrofit.bash",
        "bench.png",
        "report.html",
    ] {
        assert!(dir.join(made).exists(), "{made} was not written");
    }
}
