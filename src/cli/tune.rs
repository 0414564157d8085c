//! `ferrofit tune [--budget 60s] [job options]`: searches engine, precision,
//! batch size, accumulation, learning rate and GPU tile for the shortest time
//! to the target loss on one device, prints the best configurations and caches
//! the winner for `ferrofit train --tuned`.

use super::log::note;
use super::train::JobArgs;
use clap::Args;
use ferrofit::backend::devices::Inventory;
use ferrofit::backend::{select, BackendKind};
use ferrofit::bench::stats::fmt_time;
use ferrofit::config::{EngineKind, TrainConfig};
use ferrofit::trainer::{choose_engine, Trainer};
use ferrofit::tune::candidates::Space;
use ferrofit::tune::{cache, Settings, Trial};
use std::path::PathBuf;
use std::time::Instant;

/// Arguments of `tune`.
#[derive(Args, Debug)]
pub struct TuneArgs {
    /// Backend: auto picks CUDA, then a discrete GPU, then an integrated GPU, then the CPU.
    #[arg(long, value_enum, default_value = "auto")]
    backend: BackendKind,
    /// Device index within the backend (see `ferrofit devices`).
    #[arg(long)]
    device: Option<usize>,
    /// Search time: `60s`, `2m`, or plain seconds.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    budget: f64,
    #[command(flatten)]
    job: JobArgs,
    /// Tuned-configuration cache (default: $XDG_DATA_HOME/ferrofit/tuned.json).
    #[arg(long)]
    cache: Option<PathBuf>,
    /// Rows of the table.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Print every trial as one JSON object.
    #[arg(long)]
    json: bool,
}

/// `60s`, `1.5m`, `90` → seconds.
fn parse_duration(s: &str) -> Result<f64, String> {
    let (num, mult) = match s.trim() {
        t if t.ends_with("ms") => (&t[..t.len() - 2], 1e-3),
        t if t.ends_with('s') => (&t[..t.len() - 1], 1.0),
        t if t.ends_with('m') => (&t[..t.len() - 1], 60.0),
        t => (t, 1.0),
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v * mult),
        _ => Err(format!("`{s}` is not a duration: write e.g. 60s, 2m or 90")),
    }
}

/// Runs `tune`.
pub fn run(a: TuneArgs) -> anyhow::Result<()> {
    let cfg = a.job.config();
    cfg.validate()?;
    let inv = Inventory::probe_for(&[a.backend]);
    let target = select::select(&inv, a.backend, a.device)?;
    let space = Space {
        fused: choose_engine(&target, &cfg, EngineKind::Fused).is_ok(),
        gpu: target.backend.is_gpu(),
        // Half precision only where it is faster: tensor cores (elsewhere
        // it is emulated at f32's speed or below).
        tensor: ferrofit::trainer::tensor_cores(
            &target,
            &TrainConfig {
                precision: ferrofit::config::Precision::Bf16,
                ..cfg.clone()
            },
        ),
    };
    note!(
        "tune: {} n={} on {} [{}], budget {}",
        cfg.data,
        cfg.n,
        target.label(),
        target.info.name,
        fmt_time(a.budget)
    );
    let mut trial_no = 0usize;
    let mut runner = |engine: EngineKind, c: &TrainConfig| {
        trial_no += 1;
        let r = Trainer::new(c.clone(), target.clone())
            .engine(engine)
            .run()
            .map(|r| r.outcome);
        if let Ok(o) = &r {
            note!(
                "  run {trial_no:>3}: {:<48} {} {}",
                ferrofit::tune::candidates::Candidate::of(c, engine).label(),
                fmt_time(o.train_seconds),
                if o.reached_target { "reached" } else { "" }
            );
        }
        r
    };
    let start = Instant::now();
    let settings = Settings {
        budget: a.budget,
        ..Settings::default()
    };
    let report = ferrofit::tune::tune(&mut runner, &cfg, space, &settings, &mut || {
        start.elapsed().as_secs_f64()
    })?;
    let key = cache::key(&target.label(), &target.info, &cfg);
    let cache_path = a.cache.clone().unwrap_or_else(cache::default_path);
    let winner = report.winner().cloned();
    if let Some(w) = &winner {
        cache::store(
            &cache_path,
            &key,
            cache::Entry {
                candidate: w.candidate.clone(),
                steps: w.steps,
                target_loss: report.target_loss,
                seconds: w.seconds,
                baseline_seconds: report.baseline.seconds,
                ferrofit_version: env!("CARGO_PKG_VERSION").into(),
            },
        )?;
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "backend": target.label(),
                "device": target.info,
                "config": cfg,
                "key": key,
                "report": report,
                "winner": winner,
                "search_seconds": start.elapsed().as_secs_f64(),
            }))?
        );
        return Ok(());
    }
    println!(
        "Target loss {:.5} (the job's own final loss unless --target-loss); {} trials in {}, {} untried.\n",
        report.target_loss,
        report.trials.len() + 1,
        fmt_time(start.elapsed().as_secs_f64()),
        report.untried
    );
    println!("| # | configuration | time to target | steps | × the job as given | note |\n|---|---|---|---|---|---|");
    for (i, t) in report.ranked().iter().take(a.top).enumerate() {
        println!("{}", row(i + 1, t, &report.baseline));
    }
    match &winner {
        Some(w) if w.label != report.baseline.label => println!(
            "\nbest: {} — {} vs {} for the job as given ({:.1}×). Cached in {}; `ferrofit train --tuned` with the same options uses it.",
            w.label,
            fmt_time(w.seconds),
            fmt_time(report.baseline.seconds),
            report.baseline.seconds / w.seconds,
            cache_path.display()
        ),
        Some(_) => println!("\nthe job as given was the fastest configuration tried; cached in {}.", cache_path.display()),
        None => println!("\nno configuration reached the target loss: give a larger --target-loss or more --steps"),
    }
    Ok(())
}

fn row(rank: usize, t: &Trial, base: &Trial) -> String {
    let label = if std::ptr::eq(t, base) {
        format!("{} (as given)", t.label)
    } else {
        t.label.clone()
    };
    let (time, speed) = if t.reached {
        (
            fmt_time(t.seconds),
            format!("{:.2}", base.seconds / t.seconds),
        )
    } else {
        ("—".into(), "—".into())
    };
    format!(
        "| {rank} | {label} | {time} | {} | {speed} | {} |",
        t.steps,
        t.note.as_deref().unwrap_or("")
    )
}
