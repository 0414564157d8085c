//! `ferrofit doctor [--backend ...] [--lr X] [--json]`: adapters, then every
//! check on every device; exit code 1 when a check fails, so it can gate CI.

use super::log::note;
use clap::Args;
use ferrofit::backend::devices::Inventory;
use ferrofit::backend::kernel_cache;
use ferrofit::backend::select::{self, Target};
use ferrofit::backend::BackendKind;
use ferrofit::doctor::{checks, DeviceReport, DoctorRecord, Severity};

/// Arguments of `doctor`.
#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// Backends to check (comma-separated); default: every device found.
    #[arg(long, value_enum, value_delimiter = ',')]
    backend: Vec<BackendKind>,
    /// Also check that the loss falls with this learning rate.
    #[arg(long)]
    lr: Option<f64>,
    /// Largest number of points the memory probe tries (e.g. 1e8).
    #[arg(long, default_value_t = 1 << 26, value_parser = ferrofit_spec::args::count)]
    max_n: usize,
    /// Print one JSON object instead of the report.
    #[arg(long)]
    json: bool,
}

/// Runs `doctor`; returns an error (exit 2) on bad arguments, exits 1 on a failed check.
pub fn run(a: DoctorArgs) -> anyhow::Result<()> {
    if let Some(lr) = a.lr {
        if !(lr.is_finite() && lr > 0.0) {
            anyhow::bail!(ferrofit::FerroError::arg(
                "lr",
                lr,
                "the learning rate must be a finite number > 0"
            ));
        }
    }
    let inv = Inventory::probe();
    let targets: Vec<Target> = if a.backend.is_empty() {
        select::every_device(&inv)
    } else {
        a.backend
            .iter()
            .map(|&k| select::select(&inv, k, None))
            .collect::<Result<_, _>>()?
    };
    let mut reports = Vec::new();
    for t in &targets {
        if !a.json {
            note!("doctor: checking {} ({}) ...", t.label(), t.info.name);
        }
        reports.push(DeviceReport {
            backend: t.label(),
            device: t.info.clone(),
            findings: checks::all(t, a.lr, a.max_n),
        });
    }
    let failed = reports
        .iter()
        .flat_map(|r| &r.findings)
        .any(|f| f.severity == Severity::Fail);
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&DoctorRecord {
                notes: inv.notes.clone(),
                devices: reports,
                failed,
                kernel_cache: kernel_cache::summary(),
            })?
        );
    } else {
        for r in &reports {
            let d = &r.device;
            let mem = d
                .memory_bytes
                .map(|b| {
                    format!(
                        "{:.1} GiB {}",
                        b as f64 / (1u64 << 30) as f64,
                        d.memory_note
                    )
                })
                .unwrap_or_default();
            println!(
                "{} #{}: {} [{:?}, {}] driver {} — {}",
                r.backend, d.index, d.name, d.class, d.vendor, d.driver, mem
            );
            if !d.features.is_empty() {
                println!("  features: {}", d.features.join(", "));
            }
            for f in &r.findings {
                let mark = match f.severity {
                    Severity::Pass => "ok  ",
                    Severity::Warn => "warn",
                    Severity::Fail => "FAIL",
                };
                println!("  {mark} {:<24} {}", f.check, f.detail);
                if let Some(fix) = &f.fix {
                    println!("       fix: {fix}");
                }
            }
        }
        println!("kernel cache: {}", kernel_cache::summary());
        for n in &inv.notes {
            println!("note: {n}");
        }
    }
    if failed {
        std::process::exit(ferrofit::error::exit::FAILED);
    }
    Ok(())
}
