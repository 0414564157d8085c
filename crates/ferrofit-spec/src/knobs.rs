//! The parts of a configuration that drive a run rather than define the job:
//! [`RunControl`] (when to stop and report) and [`KernelKnobs`] (how the
//! engines run it on a device). Both are recorded flat beside the job's fields.

use serde::{Deserialize, Serialize};

/// How a run is driven and reported. Recorded flat beside the job's fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunControl {
    /// Stop as soon as the loss is at or below this.
    pub target_loss: Option<f64>,
    /// Loss is read back every this many steps (1 = every step).
    pub log_every: usize,
    /// Stop (without reaching the target) once this many seconds have passed;
    /// checked when the loss is read back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_seconds: Option<f64>,
    /// Write a resumable checkpoint every this many steps (needs an output folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_every: Option<usize>,
    /// Stop once the validation loss has not improved for this many log
    /// points in a row (needs validation rows: `--csv` data).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patience: Option<usize>,
    /// Runs the first step without waiting for the device to time it (the
    /// outcome's first-step time is then 0). A benchmark's timed runs set it,
    /// so their clock covers the steps without a host round trip among them;
    /// never recorded.
    #[serde(skip)]
    pub untimed_first_step: bool,
}

impl Default for RunControl {
    fn default() -> Self {
        RunControl {
            target_loss: None,
            log_every: 1,
            max_seconds: None,
            checkpoint_every: None,
            patience: None,
            untimed_first_step: false,
        }
    }
}

/// Engine and kernel knobs: where the data is made and how the fused GPU
/// kernels split the work. `ferrofit tune` picks them; the defaults suit
/// most devices. Recorded flat beside the job's fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelKnobs {
    /// Create the data on the device (true) or on the host and upload it.
    pub data_on_device: bool,
    /// GPU fused kernel: points each thread walks before more workgroups are
    /// launched (`None`: the built-in default).
    #[serde(default)]
    pub points_per_unit: Option<usize>,
    /// GPU fused kernel: threads sharing each point, each with a slice of the
    /// hidden units (`None`: chosen from the layer's width; at most the
    /// device's plane size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lanes: Option<usize>,
    /// GPU fused kernel: run full-batch steps in one persistent launch (true)
    /// or two launches per step (false; the fallback for devices where the
    /// persistent grid cannot run, and a reference).
    #[serde(default = "persistent_default")]
    pub persistent: bool,
    /// GPU fused kernel: workgroups of the persistent launch (`None`: as many
    /// as the points need, up to the most the device runs at once). A
    /// checkpoint records the grid its run used, so that a resumed run sums
    /// its gradients in the same order as the run it continues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid: Option<u32>,
    /// GPU fused kernel for several hidden layers (the tiled kernel): threads
    /// a workgroup, a power of two from 32 to 1024 (`None`: chosen by the
    /// model and device; at most what the device allows). The gradients do
    /// not depend on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tiled_threads: Option<usize>,
}

impl Default for KernelKnobs {
    fn default() -> Self {
        KernelKnobs {
            data_on_device: true,
            points_per_unit: None,
            lanes: None,
            persistent: true,
            grid: None,
            tiled_threads: None,
        }
    }
}

fn persistent_default() -> bool {
    true
}
