//! Training engines behind one interface.
//!
//! An engine owns the model, the optimizer and the data on its device, and
//! knows how to do one micro-batch and one optimizer step. The loop that drives
//! it (schedule, accumulation, logging, early stop) is shared: [`run::train`].

pub mod checkpoint;
pub mod fused;
pub mod general;
pub mod parallel;
pub mod phases;
pub mod run;

use crate::batches::Batch;
use crate::error::Result;
use crate::model::Params;
use checkpoint::OptState;

/// One engine on one device, holding model, optimizer state and data.
pub trait StepEngine {
    /// Forward and backward of one micro-batch; gradients add up until [`StepEngine::apply`].
    /// `count` is the number of points in the whole optimizer step, for the mean.
    fn accumulate(&mut self, batch: &Batch, count: usize) -> Result<()>;
    /// Applies the optimizer to the accumulated gradient and clears it.
    fn apply(&mut self, lr: f64) -> Result<()>;
    /// Mean loss of the last optimizer step (waits for the device).
    fn last_loss(&mut self) -> Result<f64>;
    /// Waits until all queued work is done.
    fn sync(&mut self) -> Result<()>;
    /// The trained parameters, read back to the host.
    fn params(&mut self) -> Result<Params>;
    /// How the engine runs on its device, when that is worth recording
    /// (for example the fused GPU kernel's launch scheme).
    fn detail(&self) -> Option<String> {
        None
    }
    /// Loss-scaling events so far (skipped steps), for mixed precision.
    fn skipped_steps(&self) -> usize {
        0
    }
    /// True when [`StepEngine::last_loss`] costs no device round trip, so the
    /// loop can check every step for NaN/Inf.
    fn loss_is_free(&self) -> bool {
        false
    }
    /// The optimizer's state, for checkpoints.
    fn optimizer_state(&mut self) -> Result<OptState> {
        Err(no_checkpoints())
    }
    /// Restores a checkpoint's optimizer state (weights are given at creation).
    fn load_optimizer_state(&mut self, _state: &OptState) -> Result<()> {
        Err(no_checkpoints())
    }
    /// The gradient accumulated since the last update, flat in
    /// [`Params::flatten`] order with the loss appended, and clears it — the
    /// part a data-parallel replica contributes to the all-reduce.
    fn take_gradient(&mut self) -> Result<Vec<f32>> {
        Err(no_data_parallel())
    }
    /// Applies a gradient (flat, loss last) summed over every replica.
    fn apply_gradient(&mut self, _g: &[f32], _lr: f64) -> Result<()> {
        Err(no_data_parallel())
    }
}

fn no_data_parallel() -> crate::FerroError {
    crate::FerroError::OutsideEnvelope {
        reason: "data parallelism (--devices) needs the fused engine".into(),
    }
}

fn no_checkpoints() -> crate::FerroError {
    crate::FerroError::OutsideEnvelope {
        reason:
            "checkpoints (--checkpoint-every, --resume) need the fused engine's optimizer state"
                .into(),
    }
}
