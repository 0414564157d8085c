//! Half precision where no tensor core computes it: the numerics of the GPU's
//! tensor-core pass, emulated — by the fused CPU engine, and by the GPU's
//! f32 tiled kernel on a device or model the tensor-core pass does not take
//! (WGSL and lavapipe, a model of silu/gelu or a width not a multiple of 16;
//! `gpu::kernels::round`). The hidden-to-hidden products take f16 or
//! bf16 operands — the weights, the activations going in, the δs coming
//! back — and accumulate in f32; the first and output layers, the biases,
//! the optimizer and the master weights stay f32. A product of two half
//! values is exact in f32, so rounding each operand once (the weights once a
//! step, activations and δs as a block stores them) and multiplying in f32
//! is what a tensor core computes, up to the order of the sums.
//!
//! Rounding costs a pass over each stored value and buys no speed: neither
//! the CPU nor the f32 kernel has a half-precision multiply to use. It lets
//! a run's numerics be checked on any machine, and gives `--precision
//! f16|bf16` the fused engine on every device.

use crate::config::Precision;
use crate::model::Params;

/// The half-precision operand type of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Half {
    /// 8 bits of mantissa, f32's exponent range.
    Bf16,
    /// 11 bits of mantissa, exponents down to 2⁻²⁴.
    F16,
}

impl Half {
    /// The operand type `--precision` names (None for f32).
    pub fn of(p: Precision) -> Option<Half> {
        match p {
            Precision::F32 => None,
            Precision::Bf16 => Some(Half::Bf16),
            Precision::F16 => Some(Half::F16),
        }
    }

    /// `v` rounded to the nearest value of this type (ties to even), as f32.
    #[inline(always)]
    pub fn round(self, v: f32) -> f32 {
        match self {
            Half::Bf16 => ::half::bf16::from_f32(v).to_f32(),
            Half::F16 => ::half::f16::from_f32(v).to_f32(),
        }
    }

    /// Every value of `row` rounded in place.
    #[inline(always)]
    pub fn round_all(self, row: &mut [f32]) {
        for v in row {
            *v = self.round(*v);
        }
    }

    /// `p` with the weights of its hidden-to-hidden layers rounded (biases,
    /// first and output layers as they are).
    pub fn operands(self, p: &Params) -> Params {
        let mut q = p.clone();
        let last = q.layers.len().saturating_sub(1);
        for l in q.layers.iter_mut().take(last).skip(1) {
            self.round_all(&mut l.w);
        }
        q
    }
}

/// Whether layer `li` of `layers` multiplies hidden activations into hidden
/// units (neither the first nor the output layer).
#[inline(always)]
pub fn hidden_to_hidden(li: usize, layers: usize) -> bool {
    li >= 1 && li + 1 < layers
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelSpec;

    #[test]
    fn rounding_keeps_the_types_mantissas() {
        let v = 1.0 + 2f32.powi(-9) + 2f32.powi(-12);
        assert_eq!(Half::Bf16.round(v), 1.0);
        assert_eq!(Half::F16.round(v), 1.0 + 2f32.powi(-9));
        // f16 has no exponent below 2⁻²⁴: a tiny δ would vanish.
        assert_eq!(Half::F16.round(1e-9), 0.0);
        assert!(Half::Bf16.round(1e-9) > 0.0);
    }

    #[test]
    fn only_hidden_to_hidden_weights_are_rounded() {
        let spec = ModelSpec {
            hidden: 16,
            layers: 3,
            ..crate::config::TrainConfig::default().model
        };
        let p = Params::init(&spec, 3);
        let q = Half::Bf16.operands(&p);
        let n = p.layers.len();
        for (li, (a, b)) in p.layers.iter().zip(&q.layers).enumerate() {
            assert_eq!(a.b, b.b, "layer {li}: biases stay f32");
            if hidden_to_hidden(li, n) {
                assert!(b.w.iter().all(|&w| Half::Bf16.round(w) == w));
                assert_ne!(a.w, b.w, "layer {li}: rounded");
            } else {
                assert_eq!(a.w, b.w, "layer {li}: first and output layers stay f32");
            }
        }
    }
}
