//! What the fused engine supports, checked before a run starts.
//!
//! CPU and GPU: inputs 1–16, outputs 1–16, hidden width 1–128, 1–8 hidden
//! layers, every activation and loss of `train`, f32 compute. f16/bf16: on
//! the CPU for two or more hidden layers (operands rounded, `cpu::half`); on
//! the GPU on tensor cores for the models the tensor-core kernel takes, where
//! the device has them (its platform checks). The GPU has no gradient
//! clipping. On the GPU one hidden layer of at most 767 parameters
//! takes the per-point kernels (and the persistent one); anything larger the
//! tiled kernel. Outside this `--engine auto` uses the general engine
//! and records why; `--engine fused` fails with the reason.

use crate::config::{Precision, TrainConfig};
use crate::error::{FerroError, Result};

/// Largest input or output width.
pub const MAX_IO: usize = 16;
/// Largest hidden width.
pub const MAX_HIDDEN: usize = 128;
/// Largest number of hidden layers.
pub const MAX_LAYERS: usize = 8;

/// Ok when the fused CPU engine can train `cfg`, else the reason. Half
/// precision takes the models the GPU's tensor-core pass takes at least
/// (two or more hidden layers: a one-layer model has no hidden-to-hidden
/// product to give half-precision operands).
pub fn check(cfg: &TrainConfig) -> Result<()> {
    check_sizes(cfg)?;
    if cfg.precision != Precision::F32 && cfg.model.layers < 2 {
        return Err(FerroError::OutsideEnvelope {
            reason: format!(
                "--precision {} rounds the operands of the products between hidden layers, \
                 and one hidden layer has none; use --precision f32 (or --layers 2 or more)",
                cfg.precision.name()
            ),
        });
    }
    Ok(())
}

/// Ok when the model's sizes are inside the envelope.
fn check_sizes(cfg: &TrainConfig) -> Result<()> {
    let m = &cfg.model;
    let fail = |reason: String| Err(FerroError::OutsideEnvelope { reason });
    if m.inputs > MAX_IO || m.outputs > MAX_IO {
        return fail(format!(
            "{} inputs / {} outputs; at most {MAX_IO} each",
            m.inputs, m.outputs
        ));
    }
    if m.hidden > MAX_HIDDEN {
        return fail(format!(
            "--hidden {} is over {MAX_HIDDEN}; reduce --hidden",
            m.hidden
        ));
    }
    if m.layers > MAX_LAYERS {
        return fail(format!(
            "--layers {} is over {MAX_LAYERS}; reduce --layers",
            m.layers
        ));
    }
    Ok(())
}

/// Ok when the fused GPU kernels can train `cfg`, else the reason.
/// (Half precision: the device's platform then checks for tensor cores.)
pub fn check_gpu(cfg: &TrainConfig) -> Result<()> {
    check_sizes(cfg)?;
    if cfg.clip_grad.is_some() {
        return Err(FerroError::OutsideEnvelope {
            reason: "the GPU kernel has no gradient clipping; drop --clip-grad".into(),
        });
    }
    Ok(())
}
