//! `ferrofit train`: every knob of the field report, a progress display, a
//! summary (or one JSON object), and `--out DIR` with the model and run record.

use super::progress::Display;
use crate::backend::devices::Inventory;
use crate::backend::{dispatch, select, BackendKind};
use crate::config::{
    Activation, EngineKind, Loss, ModelSpec, OptimizerKind, Precision, Schedule, TrainConfig,
};
use crate::io::write_atomic;
use crate::record::RunRecord;
use crate::tune::cache;
use clap::Args;
use std::collections::HashMap;
use std::path::PathBuf;

/// Arguments of `train`.
#[derive(Args, Debug)]
pub struct TrainArgs {
    /// Backend: auto picks CUDA, then a discrete GPU, then an integrated GPU, then the CPU.
    #[arg(long, value_enum, default_value = "auto")]
    backend: BackendKind,
    /// Device index within the backend (see `ferrofit devices`).
    #[arg(long)]
    device: Option<usize>,
    /// Engine: fused when the model fits its envelope, else the general (Burn) one.
    #[arg(long, value_enum, default_value = "auto")]
    engine: EngineKind,
    #[command(flatten)]
    job: JobArgs,
    /// Write model.safetensors and run.json here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print one JSON object on stdout instead of the summary.
    #[arg(long)]
    json: bool,
    /// Use the configuration `ferrofit tune` found for this job on this device.
    #[arg(long)]
    tuned: bool,
    /// Tuned-configuration cache (default: $XDG_DATA_HOME/ferrofit/tuned.json).
    #[arg(long)]
    tune_cache: Option<PathBuf>,
}

/// The job's knobs, shared by `train` and `bench`; defaults are the field report's seed job.
#[derive(Args, Debug, Clone)]
pub struct JobArgs {
    /// Built-in target function: x2-noise (the report's), sin, step, gauss-bumps.
    #[arg(long, default_value = "x2-noise")]
    task: String,
    /// Number of points.
    #[arg(long, default_value_t = 1_000_000)]
    n: usize,
    /// Width of each hidden layer.
    #[arg(long, default_value_t = 10)]
    hidden: usize,
    /// Number of hidden layers.
    #[arg(long, default_value_t = 1)]
    layers: usize,
    #[arg(long, value_enum, default_value = "relu")]
    activation: Activation,
    #[arg(long, value_enum, default_value = "mse")]
    loss: Loss,
    #[arg(long, value_enum, default_value = "sgd")]
    optimizer: OptimizerKind,
    /// Learning rate (default: 0.2 for sgd, 0.05 for momentum, 0.02 for adam/adamw).
    #[arg(long)]
    lr: Option<f64>,
    #[arg(long, default_value_t = 0.0)]
    weight_decay: f64,
    #[arg(long, value_enum, default_value = "constant")]
    schedule: Schedule,
    /// Optimizer steps.
    #[arg(long, default_value_t = 100)]
    steps: usize,
    /// Points per micro-batch (default: the full batch).
    #[arg(long)]
    batch_size: Option<usize>,
    /// Micro-batches per optimizer step (gradient accumulation).
    #[arg(long, default_value_t = 1)]
    accumulate: usize,
    /// Compute precision; weights stay f32, f16 uses dynamic loss scaling.
    #[arg(long, value_enum, default_value = "f32")]
    precision: Precision,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Stop as soon as the loss is at or below this.
    #[arg(long)]
    target_loss: Option<f64>,
    /// Make the data on the host and upload it, instead of creating it on the device.
    #[arg(long)]
    host_data: bool,
    /// Read the loss back every K steps (default: ~20 points over the run).
    #[arg(long)]
    log_every: Option<usize>,
    /// GPU fused kernel: points per thread before more workgroups launch (default 16).
    #[arg(long)]
    points_per_unit: Option<usize>,
    /// Stop after this many seconds (checked whenever the loss is read back).
    #[arg(long)]
    max_seconds: Option<f64>,
}

impl JobArgs {
    /// The run configuration these arguments describe.
    pub fn config(&self) -> TrainConfig {
        let lr = self.lr.unwrap_or(match self.optimizer {
            OptimizerKind::Sgd => 0.2,
            OptimizerKind::Momentum => 0.05,
            OptimizerKind::Adam | OptimizerKind::Adamw => 0.02,
        });
        TrainConfig {
            task: self.task.clone(),
            n: self.n,
            model: ModelSpec {
                inputs: 1,
                hidden: self.hidden,
                layers: self.layers,
                outputs: 1,
                activation: self.activation,
            },
            loss: self.loss,
            optimizer: self.optimizer,
            lr,
            weight_decay: self.weight_decay,
            schedule: self.schedule,
            steps: self.steps,
            batch_size: self.batch_size,
            accumulate: self.accumulate,
            precision: self.precision,
            seed: self.seed,
            target_loss: self.target_loss,
            data_on_device: !self.host_data,
            log_every: self.log_every.unwrap_or((self.steps / 20).max(1)),
            points_per_unit: self.points_per_unit,
            max_seconds: self.max_seconds,
        }
    }
}

/// Runs `train`.
pub fn run(a: TrainArgs) -> anyhow::Result<()> {
    let mut cfg = a.job.config();
    cfg.validate()?;
    let inv = Inventory::probe();
    let target = select::select(&inv, a.backend, a.device)?;
    let mut engine = a.engine;
    if a.tuned {
        let path = a.tune_cache.clone().unwrap_or_else(cache::default_path);
        let entry = cache::lookup(&path, &cache::key(&target.label(), &target.info, &cfg))?;
        if !a.json {
            eprintln!(
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
        eprintln!(
            "training {} (n={}, hidden={}x{}, {:?}, lr {}) on {} [{}]",
            cfg.task,
            cfg.n,
            cfg.model.hidden,
            cfg.model.layers,
            cfg.optimizer,
            cfg.lr,
            target.label(),
            target.info.name
        );
    }
    let mut display = Display::new(cfg.steps, a.json);
    let result = dispatch::train(&target, &cfg, engine, &mut display);
    display.finish();
    let r = result?;
    let record = RunRecord::new(
        target.label(),
        target.info.clone(),
        r.engine,
        r.engine_note,
        &cfg,
        r.outcome,
    );
    if let Some(dir) = &a.out {
        let meta = HashMap::from([
            (
                "activation".to_string(),
                serde_json::to_value(cfg.model.activation)?
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            ),
            ("format".to_string(), "ferrofit-mlp-v1".to_string()),
        ]);
        crate::save::save(&r.params, &dir.join("model.safetensors"), meta)?;
        write_atomic(
            &dir.join("run.json"),
            serde_json::to_string_pretty(&record)?.as_bytes(),
        )?;
    }
    if a.json {
        println!("{}", serde_json::to_string(&record)?);
    } else {
        if let Some(note) = &record.engine_note {
            eprintln!("engine: general ({note})");
        }
        println!(
            "{} steps on {} ({:?} engine, {:?}): final loss {:.6}, {:.3} s ({:.1} steps/s, first step {:.3} s)",
            record.steps, record.backend, record.engine, record.precision, record.final_loss, record.train_seconds, record.steps_per_second, record.first_step_seconds
        );
        if let Some(dir) = &a.out {
            println!("saved {}", dir.display());
        }
    }
    Ok(())
}
