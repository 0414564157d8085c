//! Peer frameworks in the same invocation: the seed job through PyTorch and JAX
//! (`benches/peers/seed_job.py`, embedded in the binary), when `python3` can
//! import them. A missing peer is a skipped row, never an error.

use super::stats::Summary;
use super::{BenchRow, Skipped};
use crate::config::{Activation, Loss, OptimizerKind, Precision, TrainConfig};
use std::process::Command;

const SCRIPT: &str = include_str!("../../benches/peers/seed_job.py");

/// Runs the requested peers (`torch`, `jax`) on the job; rows and skips.
pub fn run(peers: &[String], cfg: &TrainConfig, reps: usize) -> (Vec<BenchRow>, Vec<Skipped>) {
    let skip = |name: &str, reason: String| Skipped {
        name: name.into(),
        backend: "python".into(),
        reason,
    };
    let m = &cfg.model;
    let seed_shape = m.inputs == 1
        && m.outputs == 1
        && m.activation == Activation::Relu
        && cfg.loss == Loss::Mse
        && cfg.optimizer == OptimizerKind::Sgd
        && cfg.batch_size.is_none()
        && cfg.accumulate == 1;
    if !seed_shape {
        return (
            vec![],
            peers
                .iter()
                .map(|p| {
                    skip(
                        p,
                        "peers run only the seed job's shape (1-H-…-H-1 ReLU MLP, MSE, full-batch SGD)"
                            .into(),
                    )
                })
                .collect(),
        );
    }
    let mut only = Vec::new();
    for p in peers {
        match p.as_str() {
            "torch" => only.extend(["torch-eager", "torch-graph", "torch-compile"]),
            // Beside JAX's default (TF32 products on tensor cores where the
            // GPU has them), its exact-f32 products: what `--precision f32` computes.
            "jax" if cfg.precision == Precision::F32 => only.extend(["jax-jit", "jax-jit-exact"]),
            "jax" => only.push("jax-jit"),
            _ => {}
        }
    }
    let path = std::env::temp_dir().join(format!("ferrofit-peers-{}.py", std::process::id()));
    if let Err(e) = std::fs::write(&path, SCRIPT) {
        return (
            vec![],
            vec![skip("peers", format!("cannot write the peer script: {e}"))],
        );
    }
    let out = Command::new("python3")
        .arg(&path)
        .args([
            "--n",
            &cfg.n.to_string(),
            "--hidden",
            &m.hidden.to_string(),
            "--layers",
            &m.layers.to_string(),
            "--steps",
            &cfg.steps.to_string(),
            "--reps",
            &reps.to_string(),
            "--precision",
            cfg.precision.name(),
            "--only",
            &only.join(","),
        ])
        .output();
    let _ = std::fs::remove_file(&path);
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            return (
                vec![],
                vec![skip("peers", format!("python3 not runnable: {e}"))],
            )
        }
    };
    parse(&String::from_utf8_lossy(&out.stdout), cfg)
}

/// Parses the script's JSON lines into rows and skips.
pub fn parse(stdout: &str, cfg: &TrainConfig) -> (Vec<BenchRow>, Vec<Skipped>) {
    let (mut rows, mut skipped) = (vec![], vec![]);
    for line in stdout.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let name = format!(
            "{} {}",
            v["peer"].as_str().unwrap_or("?"),
            v["variant"].as_str().unwrap_or("")
        )
        .trim()
        .to_string();
        if let Some(reason) = v.get("skipped") {
            skipped.push(Skipped {
                name,
                backend: "python".into(),
                reason: reason
                    .as_str()
                    .unwrap_or("skipped")
                    .chars()
                    .take(200)
                    .collect(),
            });
            continue;
        }
        let samples: Vec<f64> = v["times"]
            .as_array()
            .map(|a| a.iter().filter_map(|x| x.as_f64()).collect())
            .unwrap_or_default();
        if samples.is_empty() {
            continue;
        }
        let summary = Summary::of(&samples);
        rows.push(BenchRow {
            name,
            backend: v["device"].as_str().unwrap_or("?").into(),
            device: "python3".into(),
            throughput: cfg.n as f64 * cfg.steps as f64 / summary.median,
            samples,
            summary,
            step_latency: None,
            first_step_seconds: None,
            final_loss: v["final_loss"].as_f64().unwrap_or(f64::NAN),
            reached_target: false,
            steps: cfg.steps,
            curve: vec![],
            step_seconds: vec![],
            relative: None,
            note: None,
            warnings: Vec::new(),
        });
    }
    (rows, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rows_and_skips() {
        let out = r#"{"peer": "torch", "variant": "eager", "device": "cuda", "times": [0.1, 0.3, 0.2], "final_loss": 0.01}
{"peer": "jax", "skipped": "No module named 'jax'"}
not json"#;
        let (rows, skipped) = parse(out, &TrainConfig::default());
        assert_eq!(rows.len(), 1);
        assert_eq!(
            (rows[0].name.as_str(), rows[0].summary.median),
            ("torch eager", 0.2)
        );
        assert_eq!(skipped[0].name, "jax");
    }
}
