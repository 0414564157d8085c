//! The named choices of a training run — activation, loss, optimizer,
//! schedule, precision, engine — as the CLI spells them (clap value enums)
//! and run records store them (lowercase JSON). [`crate::config`] re-exports
//! them beside the `TrainConfig` that holds them.

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

/// Hidden-layer activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    /// max(0, z).
    Relu,
    /// tanh(z).
    Tanh,
    /// 1 / (1 + e^-z).
    Sigmoid,
    /// z · sigmoid(z) (its derivative needs z: the fused GPU kernels keep it).
    Silu,
    /// z · Φ(z), tanh approximation (its derivative needs z).
    Gelu,
}

/// Training loss (mean over points and outputs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Loss {
    /// Mean squared error.
    Mse,
    /// Mean absolute error.
    L1,
    /// Huber with delta = 1 (PyTorch's `HuberLoss()` default).
    Huber,
}

/// Optimizer; all use f32 master weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerKind {
    /// Plain SGD.
    Sgd,
    /// SGD with momentum 0.9, no dampening (PyTorch's semantics).
    Momentum,
    /// Adam (β = 0.9, 0.999; ε = 1e-8).
    Adam,
    /// Adam with decoupled weight decay (PyTorch's AdamW).
    Adamw,
}

impl OptimizerKind {
    /// The learning rate a job gets when none is given.
    pub fn default_lr(self) -> f64 {
        match self {
            OptimizerKind::Sgd => 0.2,
            OptimizerKind::Momentum => 0.05,
            OptimizerKind::Adam | OptimizerKind::Adamw => 0.02,
        }
    }
}

/// Learning-rate schedule over the run's optimizer steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Schedule {
    /// The same learning rate at every step.
    Constant,
    /// Cosine decay from lr to 0 over the run.
    Cosine,
    /// Multiply by 0.1 at 50% and 75% of the run.
    Step,
}

/// Compute precision. Weights and optimizer state stay f32 in every mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// f32 throughout (exact f32, no TF32).
    F32,
    /// f16 compute with f32 master weights and dynamic loss scaling (tensor cores where the device has them).
    F16,
    /// bf16 compute with f32 master weights (tensor cores where the device has them).
    Bf16,
}

impl Precision {
    /// The name as `--precision` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F16 => "f16",
            Precision::Bf16 => "bf16",
        }
    }
}

/// Which engine trains the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// Fused when the model fits its envelope, general otherwise.
    Auto,
    /// Burn with autodiff: any model, the reference path.
    General,
    /// A whole training step in one or two kernels.
    Fused,
}
