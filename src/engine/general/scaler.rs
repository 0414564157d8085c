//! Dynamic loss scaling with PyTorch GradScaler's semantics: multiply the loss
//! by a scale, unscale the gradients, skip the step and halve the scale when a
//! gradient is not finite, double it after a run of good steps.

use crate::config::Precision;

/// Scale state.
#[derive(Clone, Debug)]
pub struct LossScaler {
    /// The current loss scale.
    pub scale: f32,
    enabled: bool,
    good_steps: usize,
    growth_interval: usize,
    /// Steps skipped for an overflow so far.
    pub skipped: usize,
}

impl LossScaler {
    /// Enabled for f16 (start 2^16, grow every 2000 good steps); bf16 and f32 need none.
    pub fn for_precision(p: Precision) -> Self {
        LossScaler {
            scale: if p == Precision::F16 { 65536.0 } else { 1.0 },
            enabled: p == Precision::F16,
            good_steps: 0,
            growth_interval: 2000,
            skipped: 0,
        }
    }

    /// True when gradients must be checked and unscaled.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Records the outcome of a step; returns true when the step may be applied.
    pub fn update(&mut self, grads_finite: bool) -> bool {
        if !self.enabled {
            return true;
        }
        if grads_finite {
            self.good_steps += 1;
            if self.good_steps == self.growth_interval {
                self.scale *= 2.0;
                self.good_steps = 0;
            }
            true
        } else {
            self.scale = (self.scale * 0.5).max(1.0);
            self.good_steps = 0;
            self.skipped += 1;
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backs_off_on_overflow_and_grows_after_good_steps() {
        let mut s = LossScaler::for_precision(Precision::F16);
        s.growth_interval = 3;
        assert!(!s.update(false));
        assert_eq!((s.scale, s.skipped), (32768.0, 1));
        for _ in 0..3 {
            assert!(s.update(true));
        }
        assert_eq!(s.scale, 65536.0);
        let mut off = LossScaler::for_precision(Precision::Bf16);
        assert!(off.update(false) && off.scale == 1.0 && off.skipped == 0);
    }
}
