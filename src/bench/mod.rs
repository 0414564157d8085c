//! `ferrofit bench`: one job timed on every device, measured properly. One row per
//! backend/device/engine (and per peer framework), each warmed up, repeated,
//! summarised, and compared against a baseline row.

pub mod export;
pub mod history;
pub mod measure;
pub mod peers;
pub mod stats;

use crate::engine::run::LossPoint;
use serde::{Deserialize, Serialize};
use stats::Summary;

/// One row of the bench table.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BenchRow {
    /// `ferrofit fused`, `ferrofit general`, `torch eager`, `jax jit`, ...
    pub name: String,
    /// `cpu`, `cuda`, `vulkan`, ...
    pub backend: String,
    /// The device, as `ferrofit devices` names it.
    pub device: String,
    /// Seconds for the whole job (all steps), one sample per repetition.
    pub samples: Vec<f64>,
    /// The timed runs' statistics.
    pub summary: Summary,
    /// Per-step latency over one run that waits for the device after every step.
    pub step_latency: Option<Summary>,
    /// Warm-up run's first step: compilation, autotune, allocation.
    pub first_step_seconds: Option<f64>,
    /// Final loss (median over the runs).
    pub final_loss: f64,
    /// Points × steps per second at the median.
    pub throughput: f64,
    /// True when the runs stopped at `--target-loss` (times are time-to-target).
    pub reached_target: bool,
    /// Steps the median timed run took (fewer than the job's when it reached the target).
    pub steps: usize,
    /// Loss against time from the run synced after every step (empty for peers).
    pub curve: Vec<LossPoint>,
    /// Each step's seconds in that run (the jitter histogram's data).
    pub step_seconds: Vec<f64>,
    /// Times faster than the baseline row, and its propagated σ.
    pub relative: Option<(f64, f64)>,
    /// How the engine ran, or why auto chose it.
    pub note: Option<String>,
    /// What makes these times doubtful (outliers), said beside the table.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// A row that could not run, and why.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Skipped {
    /// The row it would have been.
    pub name: String,
    /// Its backend.
    pub backend: String,
    /// Why it did not run.
    pub reason: String,
}

/// Fills in `relative` against the first row matching `baseline` (a backend name).
pub fn set_relative(rows: &mut [BenchRow], baseline: &str) {
    let Some(base) = rows
        .iter()
        .find(|r| r.backend == baseline && r.name.starts_with("ferrofit"))
        .or_else(|| rows.first())
        .map(|r| r.summary.clone())
    else {
        return;
    };
    for r in rows.iter_mut() {
        r.relative = Some(stats::relative_speed(&base, &r.summary));
    }
}
