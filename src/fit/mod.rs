//! The library's front door: fit an MLP on the caller's arrays and get back a
//! [`Model`] that predicts, saves and loads — what `train --csv` and
//! `predict` do, without files or flags. Inputs and targets are standardised
//! with the training rows' statistics, which travel with the model, so the
//! caller's units go in and come out. The Python package is built on this.
//!
//! Its errors ([`FitError`]) speak of the [`Options`] fields and arguments
//! a program sets (`lr`, `val_split`), not of the command-line flags the
//! CLI's messages name; the typed [`FerroError`] is underneath to match on.
//!
//! ```no_run
//! let x: Vec<f32> = (0..1000).map(|i| i as f32 / 500.0 - 1.0).collect();
//! let y: Vec<f32> = x.iter().map(|v| v * v).collect();
//! let model = ferrofit::fit::fit(&x, &y, 1, 1, &ferrofit::fit::Options::default())?;
//! let y_hat = model.predict(&[0.5])?;
//! model.save(std::path::Path::new("runs/square"))?;
//! # Ok::<(), ferrofit::fit::FitError>(())
//! ```

use crate::backend::devices::Inventory;
use crate::backend::{select, BackendKind};
use crate::config::{
    Activation, Data, EngineKind, Loss, OptimizerKind, Precision, Schedule, TrainConfig,
};
use crate::engine::run::Progress;
use crate::error::{FerroError, Result};
use crate::model::{reference, Params};
use crate::record::RunRecord;
use crate::userdata::{self, Columns, Normalization};
use std::path::Path;

mod error;
pub use error::{in_fields, FitError};

/// How to fit: the model, the optimizer and where to run. The defaults are
/// the CLI's (`ferrofit train --help`), except that every row trains
/// (`val_split` 0) unless asked.
#[derive(Clone, Debug)]
pub struct Options {
    /// Width of each hidden layer.
    pub hidden: usize,
    /// Number of hidden layers.
    pub layers: usize,
    /// Hidden-layer activation.
    pub activation: Activation,
    /// Training loss.
    pub loss: Loss,
    /// Optimizer (f32 weights and state).
    pub optimizer: OptimizerKind,
    /// Learning rate; `None`: 0.2 for SGD, 0.05 momentum, 0.02 Adam/AdamW.
    pub lr: Option<f64>,
    /// Weight decay.
    pub weight_decay: f64,
    /// Learning-rate schedule.
    pub schedule: Schedule,
    /// Optimizer steps.
    pub steps: usize,
    /// Points per mini-batch; `None`: the full batch.
    pub batch_size: Option<usize>,
    /// Compute precision (weights stay f32).
    pub precision: Precision,
    /// Seed of the initial weights, the batches and the validation split.
    pub seed: u64,
    /// Fraction of rows held out for the validation loss (0 to 0.9).
    pub val_split: f64,
    /// Stop once the validation loss has not improved for this many log
    /// points (needs `val_split` > 0).
    pub patience: Option<usize>,
    /// Where to run: `Auto` picks CUDA, then a discrete GPU, then an
    /// integrated GPU, then the CPU.
    pub backend: BackendKind,
    /// Device index within the backend.
    pub device: Option<usize>,
    /// Engine: fused where the model fits it, else the general one.
    pub engine: EngineKind,
}

impl Default for Options {
    fn default() -> Self {
        let cfg = TrainConfig::default();
        Options {
            hidden: cfg.model.hidden,
            layers: cfg.model.layers,
            activation: cfg.model.activation,
            loss: cfg.loss,
            optimizer: cfg.optimizer,
            lr: None,
            weight_decay: cfg.weight_decay,
            schedule: cfg.schedule,
            steps: cfg.steps,
            batch_size: None,
            precision: cfg.precision,
            seed: cfg.seed,
            val_split: 0.0,
            patience: None,
            backend: BackendKind::Auto,
            device: None,
            engine: EngineKind::Auto,
        }
    }
}

/// A trained model in the caller's units.
#[derive(Clone, Debug)]
pub struct Model {
    /// Weights and biases, PyTorch's layout.
    pub params: Params,
    /// Hidden-layer activation.
    pub activation: Activation,
    /// The standardisation of inputs and targets (and their names).
    pub normalization: Normalization,
    /// How it was trained (absent for a model file without a `run.json`).
    pub record: Option<RunRecord>,
}

/// Fits a model to `x` (row-major, `inputs` values a row) and `y`
/// (`outputs` a row) as `opt` says.
pub fn fit(
    x: &[f32],
    y: &[f32],
    inputs: usize,
    outputs: usize,
    opt: &Options,
) -> std::result::Result<Model, FitError> {
    fit_with(x, y, inputs, outputs, opt, &mut ())
}

/// [`fit`], reporting each step to `progress` (which may also stop the run).
pub fn fit_with(
    x: &[f32],
    y: &[f32],
    inputs: usize,
    outputs: usize,
    opt: &Options,
    progress: &mut (dyn Progress + Send),
) -> std::result::Result<Model, FitError> {
    let rows = check_arrays(x, y, inputs, outputs)?;
    if !(0.0..=0.9).contains(&opt.val_split) {
        return Err(FerroError::arg(
            "val_split",
            opt.val_split,
            "hold out a fraction between 0 and 0.9",
        )
        .into());
    }
    let columns = Columns {
        inputs: (0..inputs).map(|i| format!("x{i}")).collect(),
        targets: (0..outputs).map(|i| format!("y{i}")).collect(),
        encodings: vec![crate::columns::Encoding::Number; inputs],
    };
    let data = userdata::split(x.to_vec(), y.to_vec(), columns, opt.val_split, opt.seed);
    if opt.patience.is_some() && data.val.is_none() {
        return Err(FerroError::arg(
            "patience",
            opt.patience.unwrap_or(0),
            format!(
                "early stopping watches held-out rows: set val_split (0.1 holds out {} of {rows})",
                rows / 10
            ),
        )
        .into());
    }
    let mut cfg = TrainConfig {
        data: Data::Arrays,
        n: data.train.len(),
        loss: opt.loss,
        optimizer: opt.optimizer,
        weight_decay: opt.weight_decay,
        schedule: opt.schedule,
        steps: opt.steps,
        batch_size: opt.batch_size,
        precision: opt.precision,
        seed: opt.seed,
        ..TrainConfig::default()
    };
    cfg.lr = opt.lr.unwrap_or(opt.optimizer.default_lr());
    cfg.model.inputs = inputs;
    cfg.model.outputs = outputs;
    cfg.model.hidden = opt.hidden;
    cfg.model.layers = opt.layers;
    cfg.model.activation = opt.activation;
    cfg.run.log_every = (opt.steps / 20).max(1);
    cfg.run.patience = opt.patience;
    cfg.kernel.data_on_device = false;
    cfg.validate()?;
    let target = select::select(&Inventory::cached_for(opt.backend), opt.backend, opt.device)?;
    let r = crate::trainer::Trainer::new(cfg.clone(), target.clone())
        .engine(opt.engine)
        .data(data.train.clone())
        .validation(data.val.clone())
        .progress(progress)
        .run()?;
    let (mut record, params) = r.into_record(&target, &cfg);
    record.add_user_data(&params, &data);
    Ok(Model {
        params,
        activation: cfg.model.activation,
        normalization: data.norm,
        record: Some(record),
    })
}

/// Rows of `x`/`y`, checked: whole rows, the same count, finite values.
fn check_arrays(x: &[f32], y: &[f32], inputs: usize, outputs: usize) -> Result<usize> {
    if inputs == 0
        || outputs == 0
        || !x.len().is_multiple_of(inputs)
        || !y.len().is_multiple_of(outputs)
    {
        return Err(FerroError::arg(
            "x",
            format!("{} values", x.len()),
            format!("x holds rows of {inputs} inputs and y rows of {outputs} targets (both at least 1); give whole rows"),
        ));
    }
    let rows = x.len() / inputs;
    if rows == 0 || y.len() / outputs != rows {
        return Err(FerroError::arg(
            "y",
            format!("{} rows", y.len() / outputs),
            format!("x has {rows} rows: give one target row per input row (at least one)"),
        ));
    }
    for (name, v, k) in [("x", x, inputs), ("y", y, outputs)] {
        if let Some(i) = v.iter().position(|a| !a.is_finite()) {
            return Err(FerroError::arg(
                name,
                v[i],
                format!(
                    "row {}, column {} is not finite: drop or fill such rows first",
                    i / k,
                    i % k
                ),
            ));
        }
    }
    Ok(rows)
}

impl Model {
    /// Inputs the model takes a row.
    pub fn inputs(&self) -> usize {
        self.params.layers[0].fan_in
    }

    /// Outputs it gives a row.
    pub fn outputs(&self) -> usize {
        self.params.layers[self.params.layers.len() - 1].fan_out
    }

    /// Predictions for `x` (row-major, [`Model::inputs`] a row), in the
    /// targets' units, [`Model::outputs`] a row. Runs on the CPU in f64.
    pub fn predict(&self, x: &[f32]) -> std::result::Result<Vec<f32>, FitError> {
        let k = self.inputs();
        if !x.len().is_multiple_of(k) || x.iter().any(|v| !v.is_finite()) {
            return Err(FerroError::arg(
                "x",
                format!("{} values", x.len()),
                format!("give whole rows of {k} finite inputs"),
            )
            .into());
        }
        let mut z = x.to_vec();
        self.normalization.inputs_to_model(&mut z);
        let mut y = reference::predict(&self.params, self.activation, &z);
        self.normalization.outputs_to_file(&mut y);
        Ok(y)
    }

    /// Writes `dir/model.safetensors` (and `dir/run.json` when the model
    /// has its record), atomically, as `ferrofit train --out` does; `dir`
    /// must be new or empty.
    pub fn save(&self, dir: &Path) -> std::result::Result<(), FitError> {
        let folder = crate::rundir::RunDir::claim(dir)?;
        match &self.record {
            Some(r) => r.save(&folder.path, &self.params)?,
            None => {
                let meta = crate::save::header(self.activation, Some(&self.normalization));
                crate::save::save(&self.params, &folder.path.join("model.safetensors"), meta)?;
            }
        }
        Ok(())
    }

    /// Reads a model saved by [`Model::save`] or `ferrofit train --out`
    /// (`dir`, or the model file itself).
    pub fn load(path: &Path) -> std::result::Result<Model, FitError> {
        let (dir, file) = if path.is_dir() {
            (path.to_path_buf(), path.join("model.safetensors"))
        } else {
            (
                path.parent().unwrap_or(Path::new(".")).to_path_buf(),
                path.to_path_buf(),
            )
        };
        let m = crate::save::load_model(&file)?;
        let (k, o) = (
            m.params.layers[0].fan_in,
            m.params.layers[m.params.layers.len() - 1].fan_out,
        );
        let normalization = m
            .normalization
            .unwrap_or_else(|| Normalization::identity(k, o));
        let record = std::fs::read(dir.join("run.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<RunRecord>(&b).ok());
        Ok(Model {
            params: m.params,
            activation: m.activation,
            normalization,
            record,
        })
    }
}
