//! Every knob of a training run, with defaults, validation and a JSON form.
//!
//! The CLI parses into [`TrainConfig`]; engines read only this struct, and the
//! run record stores it verbatim so a run can be repeated.

pub use crate::choices::{Activation, EngineKind, Loss, OptimizerKind, Precision, Schedule};
pub use crate::data::{CsvSpec, Data};
use crate::error::{FerroError, Result};
pub use crate::knobs::{KernelKnobs, RunControl};
use crate::task::Task;
use serde::{Deserialize, Serialize};

/// Shape of the MLP: `inputs -> hidden x layers -> outputs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelSpec {
    /// Input features a point.
    pub inputs: usize,
    /// Width of every hidden layer.
    pub hidden: usize,
    /// Number of hidden layers (1 = the seed's Linear-ReLU-Linear).
    pub layers: usize,
    /// Targets a point.
    pub outputs: usize,
    /// Hidden-layer activation.
    pub activation: Activation,
}

impl ModelSpec {
    /// (fan_in, fan_out) of every linear layer, input to output.
    pub fn layer_dims(&self) -> Vec<(usize, usize)> {
        let mut dims = vec![(self.inputs, self.hidden)];
        for _ in 1..self.layers {
            dims.push((self.hidden, self.hidden));
        }
        dims.push((self.hidden, self.outputs));
        dims
    }

    /// Number of trainable scalars.
    pub fn parameter_count(&self) -> usize {
        self.layer_dims().iter().map(|(i, o)| i * o + o).sum()
    }
}

/// Everything a training run needs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    /// The points: a built-in task or a CSV file.
    #[serde(flatten)]
    pub data: Data,
    /// Points of a built-in task (a CSV or arrays bring their own).
    pub n: usize,
    /// The MLP's shape.
    pub model: ModelSpec,
    /// Training loss.
    pub loss: Loss,
    /// Optimizer.
    pub optimizer: OptimizerKind,
    /// Learning rate (before the schedule).
    pub lr: f64,
    /// Weight decay (L2 for SGD and Adam, decoupled for AdamW).
    pub weight_decay: f64,
    /// Learning-rate schedule.
    pub schedule: Schedule,
    /// Optimizer steps.
    pub steps: usize,
    /// Points per micro-batch; `None` is the full batch.
    pub batch_size: Option<usize>,
    /// Micro-batches per optimizer step (loss divided by this).
    pub accumulate: usize,
    /// Compute precision.
    pub precision: Precision,
    /// Seed of the data, the initial weights and the batches.
    pub seed: u64,
    /// Clip each parameter tensor's gradient to this L2 norm (Burn's `Norm` clipping).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip_grad: Option<f64>,
    /// When to stop and report: target loss, time budget, log interval, checkpoints.
    #[serde(flatten)]
    pub run: RunControl,
    /// How the engines run the job on a device; never what it computes.
    #[serde(flatten)]
    pub kernel: KernelKnobs,
}

impl Default for TrainConfig {
    /// The seed job: x² + 0.3·U(0,1), 1e6 points, H = 10, SGD, 100 full-batch steps.
    fn default() -> Self {
        TrainConfig {
            data: Data::Task(Task::X2Noise),
            n: 1_000_000,
            model: ModelSpec {
                inputs: 1,
                hidden: 10,
                layers: 1,
                outputs: 1,
                activation: Activation::Relu,
            },
            loss: Loss::Mse,
            optimizer: OptimizerKind::Sgd,
            lr: 0.2,
            weight_decay: 0.0,
            schedule: Schedule::Constant,
            steps: 100,
            batch_size: None,
            accumulate: 1,
            precision: Precision::F32,
            seed: 42,
            clip_grad: None,
            run: RunControl::default(),
            kernel: KernelKnobs::default(),
        }
    }
}

/// Most points a job may have: the GPU kernels index points with 32-bit
/// integers (and signed offsets in places).
pub const MAX_POINTS: usize = (1 << 31) - 1;

/// Widest layer, input or output a model may have.
pub const MAX_WIDTH: usize = 1 << 16;

/// Most hidden layers a model may have.
pub const MAX_LAYERS: usize = 1024;

/// Most weights a model may have (4 GiB of f32): beyond it, allocation would
/// abort the process rather than fail.
pub const MAX_PARAMETERS: usize = 1 << 30;

impl TrainConfig {
    /// Points in one micro-batch.
    pub fn micro_batch(&self) -> usize {
        self.batch_size.unwrap_or(self.n).min(self.n)
    }

    /// Points one optimizer step processes (all micro-batches).
    pub fn points_per_step(&self) -> usize {
        match self.batch_size {
            None => self.n,
            Some(b) => b.min(self.n) * self.accumulate,
        }
    }

    /// Rejects every nonsense value with the fix named.
    pub fn validate(&self) -> Result<()> {
        let m = &self.model;
        if self.n == 0 {
            return Err(FerroError::arg(
                "n",
                0,
                "the number of points must be at least 1",
            ));
        }
        if self.n > MAX_POINTS {
            return Err(FerroError::arg(
                "n",
                self.n,
                format!(
                    "use at most {MAX_POINTS} points (the GPU kernels count points in 32 bits)"
                ),
            ));
        }
        if m.hidden == 0 {
            return Err(FerroError::arg(
                "hidden",
                0,
                "use at least 1 hidden unit (the seed job uses 10)",
            ));
        }
        if m.layers == 0 {
            return Err(FerroError::arg("layers", 0, "use at least 1 hidden layer"));
        }
        if m.inputs == 0 || m.outputs == 0 {
            return Err(FerroError::arg(
                "inputs",
                m.inputs,
                "a model needs at least one input and one output",
            ));
        }
        if m.hidden > MAX_WIDTH || m.inputs > MAX_WIDTH || m.outputs > MAX_WIDTH {
            return Err(FerroError::arg(
                "hidden",
                m.hidden.max(m.inputs).max(m.outputs),
                format!("layers, inputs and outputs are at most {MAX_WIDTH} wide"),
            ));
        }
        if m.layers > MAX_LAYERS {
            return Err(FerroError::arg(
                "layers",
                m.layers,
                format!("use at most {MAX_LAYERS} hidden layers"),
            ));
        }
        if m.parameter_count() > MAX_PARAMETERS {
            return Err(FerroError::arg(
                "hidden",
                m.hidden,
                format!(
                    "{} x {} hidden layers make {} weights; ferrofit trains at most {MAX_PARAMETERS}: use fewer or narrower layers",
                    m.hidden,
                    m.layers,
                    m.parameter_count()
                ),
            ));
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(FerroError::arg(
                "lr",
                self.lr,
                "the learning rate must be a finite number > 0, e.g. --lr 0.1",
            ));
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return Err(FerroError::arg(
                "weight-decay",
                self.weight_decay,
                "weight decay must be a finite number >= 0",
            ));
        }
        if self.steps == 0 {
            return Err(FerroError::arg("steps", 0, "train for at least 1 step"));
        }
        if self.batch_size == Some(0) {
            return Err(FerroError::arg(
                "batch-size",
                0,
                "use a positive batch size, or leave it out for the full batch",
            ));
        }
        if self.accumulate == 0 {
            return Err(FerroError::arg(
                "accumulate",
                0,
                "accumulate over at least 1 micro-batch",
            ));
        }
        if self.run.log_every == 0 {
            return Err(FerroError::arg(
                "log-every",
                0,
                "read the loss back at least every step (1) or less often (>1)",
            ));
        }
        if let Some(t) = self.run.target_loss {
            if !t.is_finite() || t < 0.0 {
                return Err(FerroError::arg(
                    "target-loss",
                    t,
                    "the target loss must be a finite number >= 0",
                ));
            }
        }
        if let Some(l) = self.kernel.lanes {
            if !(1..=32).contains(&l) || !l.is_power_of_two() {
                return Err(FerroError::arg(
                    "lanes",
                    l,
                    "lanes per point must be 1, 2, 4, 8, 16 or 32 (leave it out to choose by width)",
                ));
            }
        }
        if let Some(t) = self.kernel.tiled_threads {
            if !(32..=1024).contains(&t) || !t.is_power_of_two() {
                return Err(FerroError::arg(
                    "tiled-threads",
                    t,
                    "threads a workgroup must be 32, 64, 128, 256, 512 or 1024 (leave it out to choose by the model and device)",
                ));
            }
        }
        if self.kernel.grid == Some(0) {
            return Err(FerroError::arg(
                "grid",
                0,
                "the persistent launch needs at least 1 workgroup (leave it out to choose by the points)",
            ));
        }
        if self.kernel.points_per_unit == Some(0) {
            return Err(FerroError::arg(
                "points-per-unit",
                0,
                "each GPU thread needs at least 1 point (leave it out for the default)",
            ));
        }
        if let Some(t) = self.run.max_seconds {
            if !(t.is_finite() && t > 0.0) {
                return Err(FerroError::arg(
                    "max-seconds",
                    t,
                    "give a time limit > 0 seconds, or leave it out",
                ));
            }
        }
        if let Some(c) = self.clip_grad {
            if !(c.is_finite() && c > 0.0) {
                return Err(FerroError::arg(
                    "clip-grad",
                    c,
                    "the largest gradient norm must be a finite number > 0, e.g. --clip-grad 1.0",
                ));
            }
        }
        if self.run.checkpoint_every == Some(0) {
            return Err(FerroError::arg(
                "checkpoint-every",
                0,
                "checkpoint every K >= 1 steps, or leave it out",
            ));
        }
        match &self.data {
            Data::Csv(c) => {
                if !(0.0..=0.9).contains(&c.val_split) {
                    return Err(FerroError::arg(
                        "val-split",
                        c.val_split,
                        "hold out a fraction between 0 and 0.9 of the rows (e.g. 0.1)",
                    ));
                }
                if c.inputs.trim().is_empty() || c.targets.trim().is_empty() {
                    return Err(FerroError::arg(
                        "csv",
                        &c.path,
                        "say which columns to use: --inputs COLS --target COLS (names or 0-based indices)",
                    ));
                }
            }
            Data::Task(_) | Data::Arrays => {}
        }
        match (self.run.patience, &self.data) {
            (Some(0), _) => Err(FerroError::arg(
                "patience",
                0,
                "wait at least 1 log point for the validation loss to improve",
            )),
            (Some(k), Data::Csv(c)) if c.val_split == 0.0 => Err(FerroError::arg(
                "patience",
                k,
                "early stopping watches the validation loss: hold rows out with --val-split 0.1",
            )),
            (Some(k), Data::Task(_)) => Err(FerroError::arg(
                "patience",
                k,
                "early stopping watches the validation loss of held-out rows, which --csv data has; a built-in task has no validation set",
            )),
            _ => Ok(()),
        }
    }
}
