//! `ferrofit bench`: the job on every backend and device this machine has (or
//! those named), each row warmed up and repeated, plus PyTorch/JAX peers.

use super::log::note;
use super::train::JobArgs;
use clap::{Args, ValueEnum};
use ferrofit::backend::devices::Inventory;
use ferrofit::backend::select::Target;
use ferrofit::backend::{select, Backend, BackendKind};
use ferrofit::bench::export::{markdown, BenchRecord, Exports};
use ferrofit::bench::history::{self, History};
use ferrofit::bench::measure::{self, Plan};
use ferrofit::bench::{peers, set_relative, Skipped};
use ferrofit::config::{EngineKind, TrainConfig};
use ferrofit::engine::run::TrainOutcome;
use ferrofit::model::Params;
use ferrofit::trainer::reruns::Reruns;
use ferrofit::trainer::Trainer;
use std::path::PathBuf;

/// Which engines to bench.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EngineChoice {
    Auto,
    General,
    Fused,
    Both,
}

/// Longest rest between rows, in seconds.
const MAX_COOLDOWN: f64 = 3600.0;

/// Arguments of `bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Backends to bench (comma-separated); default: every device found.
    #[arg(long, value_enum, value_delimiter = ',')]
    backends: Vec<BackendKind>,
    /// Engines to bench: auto (as train picks), general, fused, or both.
    #[arg(long, value_enum, default_value = "auto")]
    engine: EngineChoice,
    /// Timed runs per row (`--reps` is the old name).
    #[arg(long, visible_alias = "reps", default_value_t = 5)]
    runs: usize,
    /// Untimed runs before the timed ones (compilation, caches, clocks).
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Seconds to rest between rows (lets the device cool down).
    #[arg(long, default_value_t = 0.0)]
    cooldown: f64,
    /// Backend of the row the others are compared with (default: cuda if present, else cpu).
    #[arg(long)]
    baseline: Option<String>,
    /// Peer frameworks to run the same job through: torch, jax (skipped if not importable).
    #[arg(long, value_delimiter = ',')]
    peers: Vec<String>,
    /// Also bench data parallelism over these devices of each backend:
    /// `all`, or indices `0,1,...` (an index may repeat); one extra row each.
    #[arg(long, value_delimiter = ',')]
    devices: Vec<String>,
    #[command(flatten)]
    job: JobArgs,
    /// Write the full record (config, adapters, raw samples) as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    export_json: Option<PathBuf>,
    /// Write one row per engine and backend as CSV to FILE.
    #[arg(long, value_name = "FILE")]
    export_csv: Option<PathBuf>,
    /// Write the table as Markdown to FILE.
    #[arg(long, value_name = "FILE")]
    export_markdown: Option<PathBuf>,
    /// The old names of the --export-* flags, refused with the new name: as an
    /// output, `--csv` overwrote what `train --csv` reads.
    #[arg(long, hide = true)]
    json: Option<PathBuf>,
    #[arg(long, hide = true)]
    csv: Option<PathBuf>,
    #[arg(long, hide = true)]
    markdown: Option<PathBuf>,
    /// Draw bars (median, min … max) and loss-vs-time curves: FILE.svg or
    /// FILE.png; `--plot` alone draws the bars in the terminal.
    #[arg(long, num_args = 0..=1, default_missing_value = "-")]
    plot: Option<PathBuf>,
    /// Bench history database (default: $XDG_DATA_HOME/ferrofit/history.sqlite).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Do not record this bench in the history.
    #[arg(long)]
    no_history: bool,
    /// Compare with the previous bench of the same job on the same device: `last`.
    #[arg(long, value_parser = ["last"])]
    compare: Option<String>,
}

/// Runs `bench`.
pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    for (old, given) in [
        ("json", &a.json),
        ("csv", &a.csv),
        ("markdown", &a.markdown),
    ] {
        if let Some(file) = given {
            anyhow::bail!(ferrofit::FerroError::InvalidArg {
                flag: old,
                value: file.display().to_string(),
                fix: format!("bench writes its outputs with --export-{old} FILE (an output named like train's input --csv could overwrite a data file); nothing was written"),
            });
        }
    }
    let cfg = a.job.config();
    cfg.validate()?;
    if !(a.cooldown.is_finite() && (0.0..=MAX_COOLDOWN).contains(&a.cooldown)) {
        anyhow::bail!(ferrofit::FerroError::arg(
            "cooldown",
            a.cooldown,
            format!("rest between 0 and {MAX_COOLDOWN} seconds between rows, e.g. --cooldown 5")
        ));
    }
    if a.runs == 0 {
        anyhow::bail!(ferrofit::FerroError::arg(
            "runs",
            0,
            "use at least 1 timed run"
        ));
    }
    let plan = Plan {
        warmup: a.warmup,
        runs: a.runs,
    };
    let inv = if a.backends.is_empty() {
        Inventory::probe()
    } else {
        Inventory::probe_for(&a.backends)
    };
    let targets = targets(&inv, &a.backends)?;
    let baseline = a.baseline.clone().unwrap_or_else(|| {
        if targets.iter().any(|t| t.backend == Backend::Cuda) {
            "cuda".into()
        } else {
            "cpu".into()
        }
    });
    let exports = Exports {
        json: a.export_json.clone(),
        csv: a.export_csv.clone(),
        markdown: a.export_markdown.clone(),
    };
    let plot = a.plot.clone().filter(|p| p.as_os_str() != "-");
    // Every file asked for, rewritten after each row: a stopped bench keeps what it measured.
    let save = |rec: &BenchRecord| -> ferrofit::Result<()> {
        exports.write(rec)?;
        plot.as_ref()
            .map_or(Ok(()), |p| ferrofit::chart::picture::write_bench(p, rec))
    };
    // Open the history first, so a bad --db fails before minutes of measuring.
    let mut history = match (a.no_history, &a.compare) {
        (true, None) => None,
        _ => Some(History::open(
            &a.db.clone().unwrap_or_else(history::default_path),
        )?),
    };
    let mut rec = BenchRecord::new(cfg.clone(), a.runs, baseline.clone(), inv.clone());
    rec.warmup = a.warmup;
    for (i, t) in targets.iter().enumerate() {
        for engine in engines(a.engine) {
            if i > 0 && a.cooldown > 0.0 {
                std::thread::sleep(std::time::Duration::from_secs_f64(a.cooldown));
            }
            note!("bench: {} {:?} on {} ...", t.label(), engine, t.info.name);
            match bench_row(t, &cfg, engine, plan) {
                Ok(row) => rec.rows.push(row),
                Err(e) => rec.skipped.push(Skipped {
                    name: format!("ferrofit {engine:?}").to_lowercase(),
                    backend: t.label(),
                    reason: e.to_string(),
                }),
            }
            set_relative(&mut rec.rows, &baseline);
            save(&rec)?;
        }
        if !a.devices.is_empty() {
            let row = select::replicas(&inv, t.backend.into(), &a.devices)
                .and_then(|replicas| parallel_row(&replicas, &cfg, plan));
            match row {
                Ok(row) => rec.rows.push(row),
                Err(e) => rec.skipped.push(Skipped {
                    name: format!("ferrofit fused x{}", a.devices.len()),
                    backend: t.label(),
                    reason: e.to_string(),
                }),
            }
            set_relative(&mut rec.rows, &baseline);
            save(&rec)?;
        }
    }
    if !a.peers.is_empty() {
        note!("bench: peers {} ...", a.peers.join(","));
        let (rows, skipped) = peers::run(&a.peers, &cfg, a.runs);
        rec.rows.extend(rows);
        rec.skipped.extend(skipped);
        set_relative(&mut rec.rows, &baseline);
        save(&rec)?;
    }
    print!("{}", markdown(&rec));
    for r in &rec.rows {
        for w in &r.warnings {
            eprintln!("warning: {} on {}: {w}", r.name, r.backend);
        }
    }
    if a.plot.as_ref().is_some_and(|p| p.as_os_str() == "-") {
        let bars: Vec<(String, f64)> = rec
            .rows
            .iter()
            .map(|r| (format!("{} · {}", r.name, r.backend), r.summary.median))
            .collect();
        println!();
        print!("{}", ferrofit::chart::term::bars(&bars, 50));
    }
    if let Some(h) = &mut history {
        if a.compare.is_some() {
            let prev = h.previous(&rec)?;
            println!();
            for line in history::compare_lines(&rec, &prev) {
                println!("{line}");
            }
        }
        if !a.no_history {
            h.append(&rec)?;
        }
    }
    Ok(())
}

fn engines(c: EngineChoice) -> Vec<EngineKind> {
    match c {
        EngineChoice::Auto => vec![EngineKind::Auto],
        EngineChoice::General => vec![EngineKind::General],
        EngineChoice::Fused => vec![EngineKind::Fused],
        EngineChoice::Both => vec![EngineKind::Fused, EngineKind::General],
    }
}

/// Every device of the requested backends (all found devices by default).
fn targets(inv: &Inventory, wanted: &[BackendKind]) -> anyhow::Result<Vec<Target>> {
    if wanted.is_empty() {
        return Ok(select::every_device(inv));
    }
    wanted
        .iter()
        .map(|&k| Ok(select::select(inv, k, None)?))
        .collect()
}

/// A progress bar on a terminal, hidden otherwise.
fn row_bar(len: u64, msg: &str) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() || super::log::quiet() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg:40} {bar:30.cyan/blue} {pos}/{len} runs [{elapsed}]",
        )
        .expect("valid template"),
    );
    bar.set_message(msg.to_string());
    bar
}

fn bench_row(
    t: &Target,
    cfg: &TrainConfig,
    want: EngineKind,
    plan: Plan,
) -> ferrofit::Result<ferrofit::bench::BenchRow> {
    // Every run of the row on one engine: the data is uploaded once.
    let mut reruns = Reruns::new(cfg, t.clone(), want)?;
    let name = format!(
        "ferrofit {}",
        if reruns.kind() == EngineKind::Fused {
            "fused"
        } else {
            "general"
        }
    );
    let note = reruns.note().map(str::to_string);
    let mut row = timed_row(&name, &t.label(), &t.info.name, cfg, plan, |c| {
        reruns.run(c)
    })?;
    row.note = note;
    Ok(row)
}

/// Measures one row under a progress bar: warm-up, the timed runs, the
/// per-step latency run.
fn timed_row(
    name: &str,
    backend: &str,
    device: &str,
    cfg: &TrainConfig,
    plan: Plan,
    mut run: impl FnMut(&TrainConfig) -> ferrofit::Result<TrainOutcome>,
) -> ferrofit::Result<ferrofit::bench::BenchRow> {
    let runs = plan.warmup + plan.runs + 1;
    let bar = row_bar(runs as u64, &format!("{name} on {backend}"));
    let mut trainer = |c: &TrainConfig| {
        let r = run(c);
        bar.inc(1);
        r
    };
    let row = measure::measure(&mut trainer, cfg, plan, name, backend, device);
    bar.finish_and_clear();
    row
}

/// The fused engine data-parallel over `replicas` (one row: "ferrofit fused xD").
fn parallel_row(
    replicas: &[Target],
    cfg: &TrainConfig,
    plan: Plan,
) -> ferrofit::Result<ferrofit::bench::BenchRow> {
    let Some(first) = replicas.first() else {
        return Err(ferrofit::FerroError::arg(
            "devices",
            "(none)",
            "name at least one device",
        ));
    };
    let name = format!("ferrofit fused x{}", replicas.len());
    let device = format!("{}x {}", replicas.len(), first.info.name);
    note!("bench: {name} on {} ...", first.label());
    // The same points and initial weights as every other row of this job.
    let data = cfg.data.generate(cfg.n, cfg.seed)?;
    let init = Params::init(&cfg.model, cfg.seed);
    let mut row = timed_row(&name, &first.label(), &device, cfg, plan, |c| {
        Trainer::replicas(c.clone(), replicas.to_vec())
            .init(init.clone())
            .data(data.clone())
            .run()
            .map(|r| r.outcome)
    })?;
    row.note = Some(format!("data-parallel: {}", select::describe(replicas)));
    Ok(row)
}
