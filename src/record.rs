//! The JSON record of a run: configuration, device, engine, versions, loss
//! curve and timings — enough to repeat it and to compare it. Records are
//! written and read back typed (`report`, a resumed run), so a file that does
//! not fit is an error naming the field.

use crate::backend::devices::DeviceInfo;
use crate::config::{EngineKind, TrainConfig};
use crate::engine::run::TrainOutcome;
use crate::error::{FerroError, Result};
use crate::io::write_atomic;
use crate::model::Params;
use crate::save::{header, save};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Versions of what produced a run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Versions {
    /// ferrofit's version.
    pub ferrofit: String,
    /// Burn's version, from Cargo.lock.
    pub burn: String,
    /// CubeCL's version, from Cargo.lock.
    pub cubecl: String,
}

impl Versions {
    /// The versions compiled into this binary.
    pub fn current() -> Versions {
        Versions {
            ferrofit: env!("CARGO_PKG_VERSION").into(),
            burn: env!("FERROFIT_BURN_VERSION").into(),
            cubecl: env!("FERROFIT_CUBECL_VERSION").into(),
        }
    }
}

/// Seconds a run spent before its first step, by phase (a process's own
/// start and the first step's kernel compilation are not in them: the first
/// is before `main`, the second is `first_step_seconds`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Startup {
    /// Listing the backend's devices and picking one (`train`; 0 where the
    /// caller named the device itself).
    pub devices: f64,
    /// Building the engine: the device's runtime, buffers and data upload,
    /// the persistent kernel's grid probe.
    pub engine: f64,
}

/// Everything about one `ferrofit train` run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunRecord {
    /// The backend that ran, as `ferrofit devices` names it.
    pub backend: String,
    /// The device that ran.
    pub device: DeviceInfo,
    /// The engine that ran (fused or general).
    pub engine: EngineKind,
    /// Why `auto` chose the general engine, and how the engine ran.
    pub engine_note: Option<String>,
    /// Compute precision.
    pub precision: crate::config::Precision,
    /// Optimizer steps taken.
    pub steps: usize,
    /// Training loss at the last step.
    pub final_loss: f64,
    /// Wall time of the steps, first included.
    pub train_seconds: f64,
    /// Steps a second after the first.
    pub steps_per_second: f64,
    /// Wall time of the first step (kernel compilation, autotune).
    pub first_step_seconds: f64,
    /// Where the time before the first step went.
    #[serde(default)]
    pub startup: Startup,
    /// Whether the run reached its target loss.
    pub reached_target: bool,
    /// Steps skipped by f16 loss scaling (an overflow lowered the scale).
    pub skipped_steps: usize,
    /// Weights and biases of the model.
    pub parameters: usize,
    /// The whole job, as validated.
    pub config: TrainConfig,
    /// Versions of ferrofit, Burn and CubeCL.
    pub versions: Versions,
    /// Loss at each log point.
    pub loss_curve: Vec<crate::engine::run::LossPoint>,
    /// Mean loss on the held-out rows of `--csv` data (standardised units).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_loss: Option<f64>,
    /// Column names and standardisation of `--csv` data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normalization: Option<crate::userdata::Normalization>,
    /// Held-out rows' first target and the model's prediction of it, in the
    /// file's units (up to [`HeldOut::MAX_ROWS`]): the report's
    /// predicted-vs-actual and residual plots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_out: Option<HeldOut>,
    /// `--csv` rows left out for a missing cell (`--missing drop`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_rows: usize,
    /// Checksum of the `model.safetensors` written with this record (see
    /// [`crate::save::checksum`]): the two belong together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_checksum: Option<String>,
}

/// Actual and predicted values of one target on rows the model did not train on.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HeldOut {
    /// The target column.
    pub target: String,
    /// The rows are training rows (no rows were held out: `--val-split 0`).
    #[serde(default)]
    pub training_rows: bool,
    /// Targets of the held-out sample, in the file's units.
    pub actual: Vec<f32>,
    /// The model's predictions for them.
    pub predicted: Vec<f32>,
}

impl HeldOut {
    /// Rows kept in a record (a scatter plot shows no more).
    pub const MAX_ROWS: usize = 2000;

    /// The first target of `data` (model units) against `p`'s predictions,
    /// both in the file's units.
    pub fn of(
        p: &Params,
        act: crate::config::Activation,
        data: &crate::task::Dataset,
        norm: &crate::userdata::Normalization,
    ) -> HeldOut {
        let rows = data.len().min(Self::MAX_ROWS);
        let x = &data.x[..rows * data.inputs];
        let (mut predicted, mut actual) = (
            crate::model::reference::predict(p, act, x),
            data.y[..rows * data.outputs].to_vec(),
        );
        norm.outputs_to_file(&mut predicted);
        norm.outputs_to_file(&mut actual);
        let first = |v: Vec<f32>| v.into_iter().step_by(data.outputs.max(1)).collect();
        HeldOut {
            target: norm.targets.first().cloned().unwrap_or_default(),
            training_rows: false,
            actual: first(actual),
            predicted: first(predicted),
        }
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl RunRecord {
    /// Assembles the record.
    pub fn new(
        backend: String,
        device: DeviceInfo,
        engine: EngineKind,
        engine_note: Option<String>,
        cfg: &TrainConfig,
        o: TrainOutcome,
    ) -> Self {
        RunRecord {
            backend,
            device,
            engine,
            engine_note,
            precision: cfg.precision,
            steps: o.steps,
            final_loss: o.final_loss,
            train_seconds: o.train_seconds,
            steps_per_second: o.steps_per_second,
            first_step_seconds: o.first_step_seconds,
            startup: Startup::default(),
            reached_target: o.reached_target,
            skipped_steps: o.skipped_steps,
            parameters: cfg.model.parameter_count(),
            config: cfg.clone(),
            versions: Versions::current(),
            loss_curve: o.curve,
            validation_loss: None,
            normalization: None,
            dropped_rows: 0,
            held_out: None,
            model_checksum: None,
        }
    }

    /// What a run on user data (`--csv`, the caller's arrays) adds: the
    /// held-out loss, the standardisation, rows dropped, and the
    /// predicted-vs-actual sample (training rows when none were held out).
    pub fn add_user_data(&mut self, p: &Params, u: &crate::userdata::UserData) {
        let (act, loss) = (self.config.model.activation, self.config.loss);
        self.validation_loss = u
            .val
            .as_ref()
            .map(|v| crate::model::reference::loss_and_grad(p, v, act, loss).0);
        self.normalization = Some(u.norm.clone());
        self.dropped_rows = u.dropped;
        let mut held = HeldOut::of(p, act, u.val.as_ref().unwrap_or(&u.train), &u.norm);
        held.training_rows = u.val.is_none();
        self.held_out = Some(held);
    }

    /// A run's outputs in `dir`: `model.safetensors` (the activation, the format
    /// and any CSV standardisation in its header), then `run.json` naming the
    /// model's checksum — each atomic, the record last, so a folder with a
    /// `run.json` always holds the model it describes.
    pub fn save(&self, dir: &Path, p: &Params) -> Result<()> {
        let record = self;
        let json = |e: serde_json::Error| FerroError::File {
            path: dir.display().to_string(),
            detail: format!("could not encode the run record: {e}"),
        };
        let meta = header(
            record.config.model.activation,
            record.normalization.as_ref(),
        );
        let sum = save(p, &dir.join("model.safetensors"), meta)?;
        let record = RunRecord {
            model_checksum: Some(sum),
            ..record.clone()
        };
        let text = serde_json::to_string_pretty(&record).map_err(json)?;
        write_atomic(&dir.join("run.json"), text.as_bytes())
    }
}
