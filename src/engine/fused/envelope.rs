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

/// Ok when each of the job's data buffers (inputs and targets, f32) fits in
/// one kernel binding of a device that limits it to `binding_bytes`
/// (lavapipe and some integrated GPUs: 128 MiB, 33.5 million values), else
/// the error naming the largest `--n` that fits. Without it the first step
/// failed deep in the runtime and a probe had to find the limit.
pub fn check_bindings(cfg: &TrainConfig, device: &str, binding_bytes: Option<u64>) -> Result<()> {
    let Some(max) = binding_bytes else {
        return Ok(());
    };
    let per_point = 4 * cfg.model.inputs.max(cfg.model.outputs) as u64;
    let need = (cfg.n as u64).saturating_mul(per_point);
    if need <= max {
        return Ok(());
    }
    const MIB: u64 = 1 << 20;
    let fits = max / per_point;
    Err(FerroError::arg(
        "n",
        cfg.n,
        format!(
            "{device} lets a kernel bind at most {} MiB of one buffer, and the data of {} \
             points take {} MiB (the fused engine keeps every point on the device): \
             use --n {fits} or less (of a data file, at most {fits} rows), or --backend cpu",
            max / MIB,
            cfg.n,
            need.div_ceil(MIB),
        ),
    ))
}

/// Ok when the fused GPU kernels can train `cfg`, else the reason. (Half
/// precision runs on tensor cores where the device and model allow, else
/// emulated: the engine chooses.)
pub fn check_gpu(cfg: &TrainConfig) -> Result<()> {
    check(cfg)?;
    if cfg.clip_grad.is_some() {
        return Err(FerroError::OutsideEnvelope {
            reason: "the GPU kernel has no gradient clipping; drop --clip-grad".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_past_one_binding_is_refused_with_the_n_that_fits() {
        let mib128 = Some(128u64 << 20);
        let at = |n| TrainConfig {
            n,
            ..TrainConfig::default()
        };
        assert!(check_bindings(&at(1 << 25), "dev", mib128).is_ok());
        assert!(check_bindings(&at((1 << 25) + 1), "dev", None).is_ok());
        let e = check_bindings(&at((1 << 25) + 1), "dev", mib128).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        assert!(e.to_string().contains("use --n 33554432 or less"), "{e}");
        // Two inputs a point: half as many points.
        let mut wide = at(1 << 25);
        wide.model.inputs = 2;
        let e = check_bindings(&wide, "dev", mib128).unwrap_err();
        assert!(e.to_string().contains("use --n 16777216 or less"), "{e}");
    }
}
