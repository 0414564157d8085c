//! The job's command-line knobs, shared by `train`, `bench` and `tune`: clap
//! parses them, [`JobArgs::config`] turns them into a [`TrainConfig`]. Kept here,
//! beside the configuration, so the fuzz target can drive the real parser.

use crate::columns::{Missing, MissingPolicy, DEFAULT_MARKERS};
use crate::config::{
    Activation, CsvSpec, Data, KernelKnobs, Loss, ModelSpec, OptimizerKind, Precision, RunControl,
    Schedule, TrainConfig,
};
use crate::task::Task;
use clap::{Args, ValueEnum};

/// The job's knobs, shared by `train` and `bench`; defaults are the seed job (y = x² + 0.3·U(0,1), N = 1e6, 1-10-1 ReLU, SGD, 100 full-batch steps).
#[derive(Args, Debug, Clone)]
pub struct JobArgs {
    /// Read flags from FILE: TOML whose keys are flag names (`hidden = 64`),
    /// or an earlier run's run.json; flags on the command line win.
    #[arg(long, value_name = "FILE", help_heading = "Job")]
    config: Option<std::path::PathBuf>,
    /// Built-in target function (x2-noise is the seed job's: y = x² + 0.3·U(0,1)).
    #[arg(long, value_enum, default_value = "x2-noise", help_heading = "Job")]
    task: Task,
    /// Number of points (an integer, or written like 1e6 or 2.5e5).
    #[arg(long, default_value_t = 1_000_000, value_parser = count, help_heading = "Job")]
    n: usize,
    /// Width of each hidden layer.
    #[arg(long, default_value_t = 10, help_heading = "Model")]
    hidden: usize,
    /// Number of hidden layers.
    #[arg(long, default_value_t = 1, help_heading = "Model")]
    layers: usize,
    /// Hidden-layer activation.
    #[arg(long, value_enum, default_value = "relu", help_heading = "Model")]
    activation: Activation,
    /// Training loss (mean over points and outputs).
    #[arg(long, value_enum, default_value = "mse", help_heading = "Model")]
    loss: Loss,
    /// Optimizer (weights and its state stay f32).
    #[arg(long, value_enum, default_value = "sgd", help_heading = "Optimizer")]
    optimizer: OptimizerKind,
    /// Learning rate (default: 0.2 for sgd, 0.05 for momentum, 0.02 for adam/adamw).
    #[arg(long, help_heading = "Optimizer")]
    lr: Option<f64>,
    /// Weight decay (L2 for sgd/momentum/adam, decoupled for adamw).
    #[arg(long, default_value_t = 0.0, help_heading = "Optimizer")]
    weight_decay: f64,
    /// Learning-rate schedule over the run.
    #[arg(
        long,
        value_enum,
        default_value = "constant",
        help_heading = "Optimizer"
    )]
    schedule: Schedule,
    /// Optimizer steps.
    #[arg(long, default_value_t = 100, help_heading = "Job")]
    steps: usize,
    /// Points per micro-batch (default: the full batch).
    #[arg(long, help_heading = "Optimizer")]
    batch_size: Option<usize>,
    /// Micro-batches per optimizer step (gradient accumulation).
    #[arg(long, default_value_t = 1, help_heading = "Optimizer")]
    accumulate: usize,
    /// Compute precision; weights stay f32. f16/bf16: the fused engine on
    /// tensor cores (CUDA, 2+ hidden layers of a multiple of 16 units), else
    /// the general engine (f16 with dynamic loss scaling).
    #[arg(long, value_enum, default_value = "f32", help_heading = "Precision")]
    precision: Precision,
    /// Seed of the data, the initial weights and the validation split.
    #[arg(long, default_value_t = 42, help_heading = "Job")]
    seed: u64,
    /// Stop as soon as the loss is at or below this.
    #[arg(long, help_heading = "Job")]
    target_loss: Option<f64>,
    /// Make the data on the host and upload it, instead of creating it on the device.
    #[arg(long, help_heading = "Kernel tuning")]
    host_data: bool,
    /// Read the loss back every K steps (default: ~20 points over the run).
    #[arg(long, help_heading = "Output")]
    log_every: Option<usize>,
    /// GPU fused kernel: points per thread before more workgroups launch (default 16).
    #[arg(long, help_heading = "Kernel tuning")]
    points_per_unit: Option<usize>,
    /// GPU fused kernel: threads that share each point, splitting the hidden
    /// units between them (1, 2, 4, … 32; default: by the layer's width).
    #[arg(long, help_heading = "Kernel tuning")]
    lanes: Option<usize>,
    /// GPU fused kernel: two launches per step instead of one persistent
    /// launch for many (for devices that cannot run every workgroup at once).
    #[arg(long, help_heading = "Kernel tuning")]
    no_persistent: bool,
    /// GPU fused kernel: workgroups of the persistent launch (default: as
    /// many as the points need, up to the most the device runs at once).
    #[arg(long, help_heading = "Kernel tuning")]
    grid: Option<u32>,
    /// GPU fused kernel for several hidden layers: threads a workgroup (32,
    /// 64, … 1024; default: by the model and device).
    #[arg(long, help_heading = "Kernel tuning")]
    tiled_threads: Option<usize>,
    /// Stop after this many seconds (checked whenever the loss is read back).
    #[arg(long, help_heading = "Job")]
    max_seconds: Option<f64>,
    /// Clip each parameter tensor's gradient to this L2 norm.
    #[arg(long, help_heading = "Optimizer")]
    clip_grad: Option<f64>,
    /// Write a resumable checkpoint every K steps into the --out folder.
    #[arg(long, help_heading = "Output")]
    checkpoint_every: Option<usize>,
    /// Stop when the validation loss (--csv data) has not improved for K log
    /// points in a row (early stopping; the last weights are kept).
    #[arg(long, help_heading = "Job")]
    patience: Option<usize>,
}

impl JobArgs {
    /// The run configuration these arguments describe.
    pub fn config(&self) -> TrainConfig {
        let lr = self.lr.unwrap_or(self.optimizer.default_lr());
        TrainConfig {
            data: Data::Task(self.task),
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
            clip_grad: self.clip_grad,
            run: RunControl {
                target_loss: self.target_loss,
                log_every: self.log_every.unwrap_or((self.steps / 20).max(1)),
                max_seconds: self.max_seconds,
                checkpoint_every: self.checkpoint_every,
                patience: self.patience,
                untimed_first_step: false,
            },
            kernel: KernelKnobs {
                data_on_device: !self.host_data,
                points_per_unit: self.points_per_unit,
                lanes: self.lanes,
                persistent: !self.no_persistent,
                grid: self.grid,
                tiled_threads: self.tiled_threads,
            },
        }
    }
}

/// User data for `train` (and `tune`): kept apart from [`JobArgs`] because
/// `bench` uses `--csv` for its table export.
#[derive(Args, Debug, Clone, Default)]
pub struct DataArgs {
    /// Train on a CSV file instead of a built-in task (needs --inputs and --target).
    #[arg(long, help_heading = "Data")]
    csv: Option<String>,
    /// CSV input columns: comma-separated names or 0-based indices.
    #[arg(long, default_value = "", help_heading = "Data")]
    inputs: String,
    /// CSV target columns, the same way.
    #[arg(long, default_value = "", help_heading = "Data")]
    target: String,
    /// Fraction of CSV rows held out for validation.
    #[arg(long, default_value_t = 0.1, help_heading = "Data")]
    val_split: f64,
    /// CSV delimiter (default: detected among , ; and tab).
    #[arg(long, help_heading = "Data")]
    delimiter: Option<char>,
    /// A row with a missing cell in a selected column: stop with its line
    /// (error), or leave the row out and count it (drop).
    #[arg(long, value_enum, default_value = "error", help_heading = "Data")]
    missing: MissingPolicy,
    /// Cell texts that mean missing, comma-separated (an empty cell always does).
    #[arg(long, value_delimiter = ',', default_values = DEFAULT_MARKERS, help_heading = "Data")]
    missing_values: Vec<String>,
    /// Input columns to one-hot encode though they hold numbers (a year, a
    /// code); columns of text are encoded so without asking.
    #[arg(long, default_value = "", help_heading = "Data")]
    categorical: String,
}

impl DataArgs {
    /// Points `cfg` at the CSV file, when one was given.
    pub fn apply(&self, cfg: &mut TrainConfig) {
        if let Some(path) = &self.csv {
            cfg.data = Data::Csv(CsvSpec {
                path: path.clone(),
                inputs: self.inputs.clone(),
                targets: self.target.clone(),
                val_split: self.val_split,
                delimiter: self.delimiter,
                missing: self.missing,
                missing_values: Missing(self.missing_values.clone()),
                categorical: self.categorical.clone(),
            });
        }
    }
}

/// The command-line flags that give `cfg` (the inverse of
/// [`JobArgs::config`] with [`DataArgs::apply`]): how `--config run.json`
/// reads an earlier run back in. Flags at their defaults are left out.
pub fn flags(cfg: &TrainConfig) -> Vec<String> {
    fn name<T: ValueEnum>(v: &T) -> String {
        v.to_possible_value()
            .map_or_else(String::new, |p| p.get_name().to_string())
    }
    let mut f: Vec<String> = Vec::new();
    let mut put = |k: &str, v: String| f.extend([format!("--{k}"), v]);
    if let Data::Task(t) = cfg.data {
        put("task", name(&t));
    }
    let m = &cfg.model;
    put("n", cfg.n.to_string());
    put("hidden", m.hidden.to_string());
    put("layers", m.layers.to_string());
    put("activation", name(&m.activation));
    put("loss", name(&cfg.loss));
    put("optimizer", name(&cfg.optimizer));
    put("lr", cfg.lr.to_string());
    put("weight-decay", cfg.weight_decay.to_string());
    put("schedule", name(&cfg.schedule));
    put("steps", cfg.steps.to_string());
    put("accumulate", cfg.accumulate.to_string());
    put("precision", name(&cfg.precision));
    put("seed", cfg.seed.to_string());
    put("log-every", cfg.run.log_every.to_string());
    let optional = [
        ("batch-size", cfg.batch_size.map(|v| v.to_string())),
        ("target-loss", cfg.run.target_loss.map(|v| v.to_string())),
        ("max-seconds", cfg.run.max_seconds.map(|v| v.to_string())),
        (
            "checkpoint-every",
            cfg.run.checkpoint_every.map(|v| v.to_string()),
        ),
        ("patience", cfg.run.patience.map(|v| v.to_string())),
        ("clip-grad", cfg.clip_grad.map(|v| v.to_string())),
        (
            "points-per-unit",
            cfg.kernel.points_per_unit.map(|v| v.to_string()),
        ),
        ("lanes", cfg.kernel.lanes.map(|v| v.to_string())),
        ("grid", cfg.kernel.grid.map(|v| v.to_string())),
        (
            "tiled-threads",
            cfg.kernel.tiled_threads.map(|v| v.to_string()),
        ),
    ];
    for (k, v) in optional {
        if let Some(v) = v {
            put(k, v);
        }
    }
    if let Data::Csv(c) = &cfg.data {
        put("csv", c.path.clone());
        put("inputs", c.inputs.clone());
        put("target", c.targets.clone());
        put("val-split", c.val_split.to_string());
        if let Some(d) = c.delimiter {
            put("delimiter", d.to_string());
        }
        put("missing", name(&c.missing));
        put("missing-values", c.missing_values.0.join(","));
        put("categorical", c.categorical.clone());
    }
    if !cfg.kernel.data_on_device {
        f.push("--host-data".into());
    }
    if !cfg.kernel.persistent {
        f.push("--no-persistent".into());
    }
    f
}

/// A count from the command line: digits (`_` allowed between them), or a
/// number in scientific notation that is a whole number (`1e6`, `2.5e5`), as
/// people write sizes.
pub fn count(s: &str) -> Result<usize, String> {
    let t = s.trim().replace('_', "");
    if let Ok(n) = t.parse::<usize>() {
        return Ok(n);
    }
    let whole = t
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0 && v.fract() == 0.0 && *v < 2f64.powi(63));
    match whole {
        Some(v) => Ok(v as usize),
        None => Err(format!(
            "`{s}` is not a count: give a whole number such as 1000000 or 1e6"
        )),
    }
}

#[cfg(test)]
mod count_tests {
    use super::*;

    /// Every configuration the flags can give comes back from its flags.
    #[test]
    fn flags_give_back_the_configuration() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            job: JobArgs,
            #[command(flatten)]
            data: DataArgs,
        }
        let parse = |flags: Vec<String>| {
            let c =
                <Cli as clap::Parser>::parse_from(std::iter::once("t".to_string()).chain(flags));
            let mut cfg = c.job.config();
            c.data.apply(&mut cfg);
            cfg
        };
        let seed = parse(vec![]);
        assert_eq!(parse(flags(&seed)), seed);
        let mut all = parse(
            "--task sin --n 2.5e5 --hidden 64 --layers 3 --activation tanh --loss huber --optimizer adamw --lr 0.003 --weight-decay 0.01 --schedule cosine --steps 7 --batch-size 100 --accumulate 2 --precision bf16 --seed 9 --target-loss 0.001 --host-data --log-every 3 --points-per-unit 8 --lanes 4 --no-persistent --grid 3 --tiled-threads 512 --max-seconds 1.5 --clip-grad 1 --checkpoint-every 5 --patience 4"
                .split(' ')
                .map(String::from)
                .collect(),
        );
        assert_eq!(parse(flags(&all)), all);
        all.data = Data::Csv(CsvSpec {
            path: "my data.csv".into(),
            inputs: "a,b".into(),
            targets: "y".into(),
            val_split: 0.2,
            delimiter: Some(';'),
            missing: MissingPolicy::Drop,
            missing_values: Missing(vec!["NA".into(), "?".into()]),
            categorical: "b".into(),
        });
        assert_eq!(parse(flags(&all)), all);
    }

    #[test]
    fn counts_are_digits_or_whole_scientific_numbers() {
        assert_eq!(count("1000000"), Ok(1_000_000));
        assert_eq!(count("1_000_000"), Ok(1_000_000));
        assert_eq!(count("1e8"), Ok(100_000_000));
        assert_eq!(count("2.5e5"), Ok(250_000));
        for bad in ["1.5", "-3", "1e300", "inf", "NaN", "ten", ""] {
            assert!(count(bad).is_err(), "{bad}");
        }
    }
}
