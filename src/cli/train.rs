//! `ferrofit train`: every knob of the job, a progress display, a
//! summary (or one JSON object), and `--out DIR` with the model and run record.

use super::log::note;
use super::progress::Display;
use clap::Args;
use ferrofit::backend::devices::Inventory;
use ferrofit::backend::{select, BackendKind};
use ferrofit::config::EngineKind;
use ferrofit::engine::checkpoint;
use ferrofit::rundir::{self, RunDir};
use ferrofit::trainer::Trainer;
use ferrofit::tune::cache;
use ferrofit::userdata;
pub use ferrofit_spec::args::{DataArgs, JobArgs};
use std::path::PathBuf;

/// Arguments of `train`.
#[derive(Args, Debug)]
pub struct TrainArgs {
    /// Backend: auto picks CUDA, then a discrete GPU, then an integrated GPU, then the CPU.
    #[arg(long, value_enum, default_value = "auto", help_heading = "Device")]
    backend: BackendKind,
    /// Device index within the backend (see `ferrofit devices`).
    #[arg(long, help_heading = "Device")]
    device: Option<usize>,
    /// Engine: fused when the model fits its envelope, else the general (Burn) one.
    #[arg(long, value_enum, default_value = "auto", help_heading = "Device")]
    engine: EngineKind,
    #[command(flatten)]
    job: JobArgs,
    #[command(flatten)]
    data: DataArgs,
    /// Write model.safetensors and run.json here.
    #[arg(long, value_name = "DIR", help_heading = "Output")]
    out: Option<PathBuf>,
    /// Print one JSON object on stdout instead of the summary.
    #[arg(long, help_heading = "Output")]
    json: bool,
    /// Use the configuration `ferrofit tune` found for this job on this device.
    #[arg(long, help_heading = "Job")]
    tuned: bool,
    /// Tuned-configuration cache (default: $XDG_DATA_HOME/ferrofit/tuned.json).
    #[arg(long, help_heading = "Job")]
    tune_cache: Option<PathBuf>,
    /// Data parallelism: `all` devices of --backend, or indices `0,1,...`
    /// (an index may repeat: several replicas on one device).
    #[arg(long, value_delimiter = ',', help_heading = "Device")]
    devices: Vec<String>,
    /// Draw the loss curve in the terminal when done.
    #[arg(long, help_heading = "Output")]
    plot: bool,
    /// Continue the run whose --out folder this is, from its newest good
    /// checkpoint, with the configuration saved there.
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with = "tuned",
        help_heading = "Job"
    )]
    resume: Option<PathBuf>,
}

/// Runs `train`.
pub fn run(a: TrainArgs) -> anyhow::Result<()> {
    let mut cfg = a.job.config();
    a.data.apply(&mut cfg);
    cfg.validate()?;
    // The folder is taken before any work: a run never writes over another's.
    let (resume, folder) = match &a.resume {
        Some(dir) => {
            if a.out.as_ref().is_some_and(|o| o != dir) {
                anyhow::bail!(ferrofit::FerroError::arg(
                    "out",
                    a.out
                        .as_ref()
                        .map_or(String::new(), |o| o.display().to_string()),
                    format!(
                        "a resumed run writes into its own folder ({}): drop --out",
                        dir.display()
                    )
                ));
            }
            let folder = RunDir::reopen(dir)?;
            let (c, notes) = checkpoint::latest(&checkpoint::folder(dir))?;
            for n in notes {
                eprintln!("warning: {n}");
            }
            let defaults = flag_defaults();
            let clash = rundir::conflicts(&cfg, &defaults, &c.config);
            if !clash.is_empty() {
                anyhow::bail!(ferrofit::FerroError::arg(
                    "resume",
                    dir.display(),
                    format!(
                        "a resumed run continues its saved job as it was, and these flags change it: {}. Drop them, or train anew into a new --out folder",
                        clash.join("; ")
                    )
                ));
            }
            let m = &c.config.model;
            note!(
                "resuming {} from {} (step {} of {}): {}, n={}, hidden={}x{}, {:?}, lr {}, seed {}",
                dir.display(),
                checkpoint::file(&checkpoint::folder(dir), c.step).display(),
                c.step,
                c.config.steps,
                c.config.data,
                c.config.n,
                m.hidden,
                m.layers,
                c.config.optimizer,
                c.config.lr,
                c.config.seed
            );
            cfg = rundir::resumed(&cfg, &defaults, &c.config);
            (Some(c), Some(folder))
        }
        None => (None, a.out.as_deref().map(RunDir::claim).transpose()?),
    };
    let out = folder.as_ref().map(|f| f.path.clone());
    if cfg.run.checkpoint_every.is_some() && out.is_none() {
        anyhow::bail!(ferrofit::FerroError::arg(
            "checkpoint-every",
            cfg.run.checkpoint_every.unwrap_or(0),
            "checkpoints go into the output folder: add --out DIR"
        ));
    }
    let user = match &cfg.data {
        ferrofit::config::Data::Csv(c) => Some(userdata::load(c, cfg.seed)?),
        ferrofit::config::Data::Task(_) | ferrofit::config::Data::Arrays => None,
    };
    if let Some(u) = &user {
        if u.dropped > 0 {
            note!(
                "left out {} of {} rows for a missing cell (--missing drop)",
                u.dropped,
                u.dropped + u.train.len() + u.val.as_ref().map_or(0, |v| v.len())
            );
        }
        cfg.n = u.train.len();
        cfg.model.inputs = u.train.inputs;
        cfg.model.outputs = u.train.outputs;
        cfg.kernel.data_on_device = false;
    }
    // A resume continues on the device that wrote the checkpoint unless --backend says otherwise.
    let (kind, index) = match (&resume, a.backend) {
        (Some(c), BackendKind::Auto) => (
            <BackendKind as clap::ValueEnum>::from_str(&c.device.0, true)
                .unwrap_or(BackendKind::Auto),
            a.device.or(Some(c.device.1)),
        ),
        _ => (a.backend, a.device),
    };
    let listed = std::time::Instant::now();
    let inv = Inventory::probe_for(&[kind]);
    let target = select::select(&inv, kind, index)?;
    let devices_seconds = listed.elapsed().as_secs_f64();
    let mut engine = a.engine;
    if a.tuned {
        let path = a.tune_cache.clone().unwrap_or_else(cache::default_path);
        let entry = cache::lookup(&path, &cache::key(&target.label(), &target.info, &cfg))?;
        if !a.json {
            note!(
                "tuned: {} ({} steps to loss {:.5})",
                entry.candidate.label(),
                entry.steps,
                entry.target_loss
            );
        }
        cfg = cache::apply(&entry, &cfg);
        engine = entry.candidate.engine;
    }
    if !a.json {
        note!(
            "training {} (n={}, hidden={}x{}, {:?}, lr {}) on {} [{}]",
            cfg.data,
            cfg.n,
            cfg.model.hidden,
            cfg.model.layers,
            cfg.optimizer,
            cfg.lr,
            target.label(),
            target.info.name
        );
    }
    let mut display = Display::new(cfg.steps, a.json || super::log::quiet());
    let checkpoints = out
        .as_ref()
        .filter(|_| cfg.run.checkpoint_every.is_some() || resume.is_some())
        .map(|d| checkpoint::folder(d));
    if checkpoints.is_some() {
        ferrofit::interrupt::install();
    }
    if cfg.run.patience.is_some() && !a.devices.is_empty() {
        anyhow::bail!(ferrofit::FerroError::arg(
            "patience",
            cfg.run.patience.unwrap_or(0),
            "early stopping runs on one device: leave out --devices"
        ));
    }
    let mut trainer = if a.devices.is_empty() {
        Trainer::new(cfg.clone(), target.clone()).engine(engine)
    } else {
        Trainer::replicas(cfg.clone(), select::replicas(&inv, kind, &a.devices)?)
    };
    trainer = trainer
        .data(user.as_ref().map(|u| u.train.clone()))
        .validation(user.as_ref().and_then(|u| u.val.clone()));
    if let Some(c) = resume {
        trainer = trainer.resume(c);
    }
    if let Some(dir) = &checkpoints {
        trainer = trainer.checkpoints(dir.clone());
    }
    let result = trainer.progress(&mut display).run();
    display.finish();
    let r = match result {
        // Said with more, keeping the error (and its exit status) as the cause.
        Err(e @ ferrofit::FerroError::Diverged { .. }) => match &checkpoints {
            Some(dir) if checkpoint::any(dir) => {
                let more = format!(
                    "{e}. The last good checkpoint is kept in {} (`--resume` continues from it)",
                    dir.display()
                );
                return Err(anyhow::Error::new(e).context(more));
            }
            Some(_) => {
                let more = format!(
                    "{e}. It diverged before its first checkpoint, so there is none to resume"
                );
                return Err(anyhow::Error::new(e).context(more));
            }
            None => anyhow::bail!(e),
        },
        // A backend failure (a bug in ferrofit is `Bug`, never this) at a
        // large N may be a size limit: the probe tells, by a smaller N that runs.
        Err(e @ ferrofit::FerroError::BackendFailed { .. })
            if user.is_none() && cfg.n > 1 << 16 =>
        {
            // Perhaps too large for the device: find what fits and say so.
            note!("training failed; probing the largest N this device takes ...");
            match ferrofit::trainer::probe::on_target(&target, &cfg) {
                Some(l) if l.fits > 0 && l.size_limit => {
                    let more = format!(
                        "{e}\nThe largest N that fits on {} is {}: use --n {} or less (the fused engine keeps all points on the device)",
                        target.label(), l.fits, l.fits
                    );
                    return Err(anyhow::Error::new(e).context(more));
                }
                _ => anyhow::bail!(e),
            }
        }
        other => other?,
    };
    let (mut record, params) = r.into_record(&target, &cfg);
    record.startup.devices = devices_seconds;
    if let Some(u) = &user {
        record.add_user_data(&params, u);
    }
    if let Some(dir) = &out {
        record.save(dir, &params)?;
    }
    if a.json {
        println!("{}", serde_json::to_string(&record)?);
    } else {
        if let Some(n) = &record.engine_note {
            note!("engine: {:?} ({n})", record.engine);
        }
        if let Some(k) = cfg.run.patience {
            if record.steps < cfg.steps && !record.reached_target {
                let best = record
                    .loss_curve
                    .iter()
                    .filter_map(|p| p.val_loss.map(|v| (v, p.step)))
                    .min_by(|a, b| a.0.total_cmp(&b.0));
                if let Some((v, step)) = best {
                    println!(
                        "stopped early: the validation loss has not improved for {k} log points (best {v:.6} at step {}; the last weights are kept)",
                        step + 1
                    );
                }
            }
        }
        println!(
            "{} steps on {} ({:?} engine, {:?}): final loss {:.6}, {:.3} s ({:.1} steps/s, first step {:.3} s)",
            record.steps, record.backend, record.engine, record.precision, record.final_loss, record.train_seconds, record.steps_per_second, record.first_step_seconds
        );
        // Replicas build their engines inside training: no set-up of their own to show.
        if a.devices.is_empty() {
            note!(
                "start-up: devices {:.3} s, engine {:.3} s (runtime, buffers, kernel probe)",
                record.startup.devices,
                record.startup.engine
            );
        }
        if a.plot {
            print!(
                "{}",
                ferrofit::chart::term::loss_chart(&record.loss_curve, 60, 12)
            );
        }
        if let Some(v) = record.validation_loss {
            println!("validation loss {v:.6} (held-out rows, standardised units)");
        }
        if let Some(dir) = &out {
            println!("saved {}", dir.display());
        }
    }
    Ok(())
}

/// The job that no flags give: a resumed run's flags are compared with the
/// saved job only where they differ from this (the flags the user typed).
fn flag_defaults() -> ferrofit::config::TrainConfig {
    #[derive(clap::Parser)]
    struct Bare {
        #[command(flatten)]
        job: JobArgs,
        #[command(flatten)]
        data: DataArgs,
    }
    let bare = <Bare as clap::Parser>::parse_from(["ferrofit"]);
    let mut cfg = bare.job.config();
    bare.data.apply(&mut cfg);
    cfg
}
