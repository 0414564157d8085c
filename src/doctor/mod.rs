//! `ferrofit doctor`: the usual pitfalls of training on a GPU as checks, run on every
//! device. Each check is a [`Finding`] with a severity and, when it fails, the
//! change that fixes it.

pub mod checks;

use crate::backend::select::Target;
use crate::backend::Backend;
use crate::batches::Batch;
use crate::config::{EngineKind, TrainConfig};
use crate::model::Params;
use crate::task::Dataset;
use crate::trainer::{RunResult, Trainer};
use serde::{Deserialize, Serialize};

/// What the checks examine: a device that trains and computes gradients. The
/// real one is a [`Target`]; tests use broken fakes to prove the checks catch them.
pub trait Subject {
    /// The backend it trains on.
    fn backend(&self) -> Backend;
    /// Trains from `init`, on `data` if given (else the task's).
    fn train_from(
        &self,
        cfg: &TrainConfig,
        engine: EngineKind,
        init: Params,
        data: Option<Dataset>,
    ) -> crate::Result<RunResult>;
    /// The general engine's gradient of the mean loss over all of `data`,
    /// flat in [`Params::flatten`] order.
    fn gradient(&self, cfg: &TrainConfig, p: &Params, data: &Dataset) -> crate::Result<Vec<f32>>;
}

impl Subject for Target {
    fn backend(&self) -> Backend {
        self.backend
    }

    fn train_from(
        &self,
        cfg: &TrainConfig,
        engine: EngineKind,
        init: Params,
        data: Option<Dataset>,
    ) -> crate::Result<RunResult> {
        Trainer::new(cfg.clone(), self.clone())
            .engine(engine)
            .init(init)
            .data(data)
            .run()
    }

    fn gradient(&self, cfg: &TrainConfig, p: &Params, data: &Dataset) -> crate::Result<Vec<f32>> {
        Trainer::new(cfg.clone(), self.clone())
            .engine(EngineKind::General)
            .init(p.clone())
            .data(data.clone())
            .gradient(&Batch::Range(0, data.len()))
    }
}

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The check held.
    Pass,
    /// Worth knowing; training still works.
    Warn,
    /// The check failed: training on this device would be wrong or fail.
    Fail,
}

/// One check's outcome on one device.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Finding {
    /// The check's name.
    pub check: String,
    /// How it came out.
    pub severity: Severity,
    /// What was measured.
    pub detail: String,
    /// What to change, when it did not pass.
    pub fix: Option<String>,
}

impl Finding {
    /// A passing finding.
    pub fn pass(check: &'static str, detail: String) -> Self {
        Finding {
            check: check.into(),
            severity: Severity::Pass,
            detail,
            fix: None,
        }
    }

    /// A warning or failure with its fix.
    pub fn bad(check: &'static str, severity: Severity, detail: String, fix: &str) -> Self {
        Finding {
            check: check.into(),
            severity,
            detail,
            fix: Some(fix.into()),
        }
    }
}

/// One device's findings, as `doctor --json` writes them.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeviceReport {
    /// The backend checked, as `ferrofit devices` names it.
    pub backend: String,
    /// The device checked.
    pub device: crate::backend::devices::DeviceInfo,
    /// What each check found.
    pub findings: Vec<Finding>,
}

/// What `doctor --json` writes: every device checked, and what could not be probed.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DoctorRecord {
    /// Why an API found nothing (not compiled in, no driver).
    #[serde(default)]
    pub notes: Vec<String>,
    /// One report a device.
    pub devices: Vec<DeviceReport>,
    /// Whether any check failed (the exit status is then 1).
    pub failed: bool,
    /// The kernel cache's state (`ferrofit cache`).
    #[serde(default)]
    pub kernel_cache: String,
}
