//! The bench table as console text, Markdown, CSV and JSON. Files are rewritten
//! atomically after every row, so a crash loses nothing already measured.

use super::stats::fmt_time;
use super::{BenchRow, Skipped};
use crate::backend::devices::Inventory;
use crate::config::TrainConfig;
use crate::error::Result;
use crate::io::write_atomic;
use crate::record::Versions;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Everything a bench produced.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BenchRecord {
    /// The job every row ran.
    pub config: TrainConfig,
    /// Timed runs a row (`--runs`; the field keeps its first name).
    pub reps: usize,
    /// Untimed runs before them (records from before `--warmup` had one).
    #[serde(default = "one")]
    pub warmup: usize,
    /// The row the others are compared with.
    pub baseline: String,
    /// The devices and drivers found.
    pub adapters: Inventory,
    /// Versions of ferrofit, Burn and CubeCL.
    pub versions: Versions,
    /// One row a device, engine or peer.
    pub rows: Vec<BenchRow>,
    /// What could not run, and why.
    pub skipped: Vec<Skipped>,
}

fn one() -> usize {
    1
}

impl BenchRecord {
    /// An empty record for a job.
    pub fn new(config: TrainConfig, reps: usize, baseline: String, adapters: Inventory) -> Self {
        BenchRecord {
            config,
            reps,
            warmup: 1,
            baseline,
            adapters,
            versions: Versions::current(),
            rows: vec![],
            skipped: vec![],
        }
    }
}

/// Where to write exports.
#[derive(Clone, Debug, Default)]
pub struct Exports {
    /// `--export-json FILE`.
    pub json: Option<PathBuf>,
    /// `--export-csv FILE`.
    pub csv: Option<PathBuf>,
    /// `--export-markdown FILE`.
    pub markdown: Option<PathBuf>,
}

impl Exports {
    /// Rewrites every requested file from `rec`.
    pub fn write(&self, rec: &BenchRecord) -> Result<()> {
        if let Some(p) = &self.json {
            write_atomic(
                p,
                serde_json::to_string_pretty(rec)
                    .expect("record serialises")
                    .as_bytes(),
            )?;
        }
        if let Some(p) = &self.csv {
            write_atomic(p, csv(rec).as_bytes())?;
        }
        if let Some(p) = &self.markdown {
            write_atomic(p, markdown(rec).as_bytes())?;
        }
        Ok(())
    }
}

/// The cells of one row, shared by every text format.
fn cells(r: &BenchRow) -> [String; 9] {
    let s = &r.summary;
    let lat = r.step_latency.as_ref();
    [
        r.name.clone(),
        format!("{} ({})", r.backend, r.device),
        fmt_time(s.median),
        format!("{} ± {}", fmt_time(s.mean), fmt_time(s.stddev)),
        format!("{} … {}", fmt_time(s.min), fmt_time(s.max)),
        lat.map(|l| {
            format!(
                "{} / {} / {}",
                fmt_time(l.median),
                fmt_time(l.p95),
                fmt_time(l.p99)
            )
        })
        .unwrap_or_else(|| "—".into()),
        lat.map(|l| format!("{:.1}%", l.cv * 100.0))
            .unwrap_or_else(|| "—".into()),
        format!("{:.5}", r.final_loss),
        r.relative
            .map(|(x, sd)| format!("{x:.2} ± {sd:.2}"))
            .unwrap_or_else(|| "—".into()),
    ]
}

const HEADER: [&str; 9] = [
    "run",
    "backend (device)",
    "median",
    "mean ± σ",
    "min … max",
    "step p50 / p95 / p99",
    "step CV",
    "loss",
    "× baseline",
];

/// A Markdown table (also used for the console).
pub fn markdown(rec: &BenchRecord) -> String {
    let mut out = format!(
        "Job: {} n={} hidden={}x{} {:?} lr {} steps {} precision {:?}; {} timed runs after {} warm-up; baseline {}.\n\n",
        rec.config.data, rec.config.n, rec.config.model.hidden, rec.config.model.layers, rec.config.optimizer, rec.config.lr, rec.config.steps, rec.config.precision, rec.reps, rec.warmup, rec.baseline
    );
    if let Some(t) = rec.config.run.target_loss {
        out += &format!(
            "Times are time to loss <= {t}; * marks rows that did not reach it in {} steps.\n\n",
            rec.config.steps
        );
    }
    let target = rec.config.run.target_loss.is_some();
    let mut header = HEADER.to_vec();
    if target {
        header.push("steps to target");
    }
    out += &format!(
        "| {} |\n|{}\n",
        header.join(" | "),
        "---|".repeat(header.len())
    );
    for r in &rec.rows {
        let mut c = cells(r).to_vec();
        if target {
            let ferrofit = r.name.starts_with("ferrofit");
            if ferrofit && !r.reached_target {
                c[0] += " *";
            }
            c.push(match (ferrofit, r.reached_target) {
                (true, true) => r.steps.to_string(),
                (true, false) => format!("> {}", r.steps),
                (false, _) => "—".into(),
            });
        }
        out += &format!("| {} |\n", c.join(" | "));
    }
    for s in &rec.skipped {
        out += &format!("\nskipped {} ({}): {}", s.name, s.backend, s.reason);
    }
    out + "\n"
}

/// CSV with raw seconds.
pub fn csv(rec: &BenchRecord) -> String {
    let mut out = String::from("name,backend,device,runs,median_s,mean_s,stddev_s,min_s,max_s,step_p50_s,step_p99_s,step_cv,final_loss,throughput,relative,relative_sd\n");
    for r in &rec.rows {
        let s = &r.summary;
        let (p50, p99, cv) = r
            .step_latency
            .as_ref()
            .map(|l| (l.median, l.p99, l.cv))
            .unwrap_or((f64::NAN, f64::NAN, f64::NAN));
        let (x, sd) = r.relative.unwrap_or((f64::NAN, f64::NAN));
        let dev = r.device.replace(',', " ");
        out += &format!(
            "{},{},{dev},{},{},{},{},{},{},{p50},{p99},{cv},{},{},{x},{sd}\n",
            r.name,
            r.backend,
            s.runs,
            s.median,
            s.mean,
            s.stddev,
            s.min,
            s.max,
            r.final_loss,
            r.throughput
        );
    }
    out
}
