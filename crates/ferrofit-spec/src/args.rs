//! The job's command-line knobs, shared by `train`, `bench` and `tune`: clap
//! parses them, [`JobArgs::config`] turns them into a [`TrainConfig`]. Kept here,
//! beside the configuration, so the fuzz target can drive the real parser.

use crate::config::{
    Activation, CsvSpec, Data, KernelKnobs, Loss, ModelSpec, OptimizerKind, Precision, RunControl,
    Schedule, TrainConfig,
};
use crate::task::Task;
use clap::Args;

/// The job's knobs, shared by `train` and `bench`; defaults are the seed job (y = x² + 0.3·U(0,1), N = 1e6, 1-10-1 ReLU, SGD, 100 full-batch steps).
#[derive(Args, Debug, Clone)]
pub struct JobArgs {
    /// Built-in target function (x2-noise is the seed job's: y = x² + 0.3·U(0,1)).
    #[arg(long, value_enum, default_value = "x2-noise")]
    task: Task,
    /// Number of points (an integer, or written like 1e6 or 2.5e5).
    #[arg(long, default_value_t = 1_000_000, value_parser = count)]
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
    /// Compute precision; weights stay f32. f16/bf16: the fused engine on
    /// tensor cores (CUDA, 2+ hidden layers of a multiple of 16 units), else
    /// the general engine (f16 with dynamic loss scaling).
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
    /// GPU fused kernel: threads that share each point, splitting the hidden
    /// units between them (1, 2, 4, … 32; default: by the layer's width).
    #[arg(long)]
    lanes: Option<usize>,
    /// GPU fused kernel: two launches per step instead of one persistent
    /// launch for many (for devices that cannot run every workgroup at once).
    #[arg(long)]
    no_persistent: bool,
    /// Stop after this many seconds (checked whenever the loss is read back).
    #[arg(long)]
    max_seconds: Option<f64>,
    /// Clip each parameter tensor's gradient to this L2 norm.
    #[arg(long)]
    clip_grad: Option<f64>,
    /// Write a resumable checkpoint every K steps into the --out folder.
    #[arg(long)]
    checkpoint_every: Option<usize>,
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
            },
            kernel: KernelKnobs {
                data_on_device: !self.host_data,
                points_per_unit: self.points_per_unit,
                lanes: self.lanes,
                persistent: !self.no_persistent,
            },
        }
    }
}

/// User data for `train` (and `tune`): kept apart from [`JobArgs`] because
/// `bench` uses `--csv` for its table export.
#[derive(Args, Debug, Clone, Default)]
pub struct DataArgs {
    /// Train on a CSV file instead of a built-in task (needs --inputs and --target).
    #[arg(long)]
    csv: Option<String>,
    /// CSV input columns: comma-separated names or 0-based indices.
    #[arg(long, default_value = "")]
    inputs: String,
    /// CSV target columns, the same way.
    #[arg(long, default_value = "")]
    target: String,
    /// Fraction of CSV rows held out for validation.
    #[arg(long, default_value_t = 0.1)]
    val_split: f64,
    /// CSV delimiter (default: detected among , ; and tab).
    #[arg(long)]
    delimiter: Option<char>,
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
            });
        }
    }
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
    use super::count;

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
