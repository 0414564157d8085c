//! Training engines behind two traits.
//!
//! An engine owns the model, the optimizer and the data on its device, and
//! knows how to do one micro-batch and one optimizer step ([`StepEngine`]).
//! Engines whose whole state is flat vectors ([`FlatEngine`]: the fused ones)
//! also write and restore checkpoints and join data-parallel runs; which
//! engine can is known from its type. The loop that drives them (schedule,
//! accumulation, logging, early stop, checkpoints) is shared: [`run`].

pub mod checkpoint;
pub mod fused;
pub mod general;
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
    /// The gradient of the mean loss over `batch` at the current weights,
    /// flat in [`Params::flatten`] order, with nothing applied (for checks).
    fn gradient(&mut self, batch: &Batch) -> Result<Vec<f32>>;
    /// How the engine runs on its device, when that is worth recording
    /// (for example the fused GPU kernel's launch scheme).
    fn detail(&self) -> Option<String> {
        None
    }
    /// Loss-scaling events so far (skipped steps), for mixed precision.
    fn skipped_steps(&self) -> usize {
        0
    }
    /// Whether its products run on the device's tensor cores (f16/bf16).
    fn tensor_cores(&self) -> bool {
        false
    }
    /// True when [`StepEngine::last_loss`] costs no device round trip, so the
    /// loop can check every step for NaN/Inf.
    fn loss_is_free(&self) -> bool {
        false
    }
}

/// An engine whose state is flat vectors: it checkpoints and runs data-parallel.
pub trait FlatEngine: StepEngine {
    /// The optimizer's state, for checkpoints.
    fn optimizer_state(&mut self) -> Result<OptState>;
    /// Restores a checkpoint's optimizer state (weights are given at creation).
    fn load_optimizer_state(&mut self, state: &OptState) -> Result<()>;
    /// The gradient accumulated since the last update, flat in
    /// [`Params::flatten`] order with the loss appended, and clears it — the
    /// part a data-parallel replica contributes to the all-reduce.
    fn take_gradient(&mut self) -> Result<Vec<f32>>;
    /// Applies a gradient (flat, loss last) summed over every replica.
    fn apply_gradient(&mut self, g: &[f32], lr: f64) -> Result<()>;
    /// Workgroups of the persistent launch, where the engine runs one (a
    /// checkpoint records it: [`crate::config::KernelKnobs::grid`]).
    fn launch_grid(&self) -> Option<u32> {
        None
    }
    /// Starts over from `init`: those weights, a zero optimizer state and
    /// nothing accumulated, on the data already on the device (a benchmark's
    /// runs after the first upload only state of the weights' size).
    fn restart(&mut self, init: &Params) -> Result<()>;
}

/// [`StepEngine::gradient`] of a flat engine: accumulate, then take the carry.
pub fn flat_gradient(e: &mut dyn FlatEngine, batch: &Batch) -> Result<Vec<f32>> {
    e.accumulate(batch, batch.len())?;
    let mut g = e.take_gradient()?;
    g.pop(); // the loss
    Ok(g)
}

/// A built engine, with what it can do in its type.
pub enum Engine {
    /// The general (Burn autodiff) engine.
    General(Box<dyn StepEngine>),
    /// A fused engine (CPU kernel or GPU kernels).
    Fused(Box<dyn FlatEngine>),
}

impl Engine {
    /// The engine's step interface.
    pub fn step(&mut self) -> &mut dyn StepEngine {
        match self {
            Engine::General(e) => e.as_mut(),
            Engine::Fused(e) => e.as_mut(),
        }
    }

    /// The flat-state interface, when the engine has one.
    pub fn flat(&mut self) -> Option<&mut dyn FlatEngine> {
        match self {
            Engine::General(_) => None,
            Engine::Fused(e) => Some(e.as_mut()),
        }
    }
}
