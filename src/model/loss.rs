//! Per-element losses and their derivatives with respect to the prediction.

use super::activation::Real;
use crate::config::Loss;

/// l(pred, target) for one element.
#[inline]
pub fn value<T: Real>(loss: Loss, pred: T, target: T) -> T {
    let r = pred - target;
    match loss {
        Loss::Mse => r * r,
        Loss::L1 => r.abs(),
        Loss::Huber => {
            if r.abs() < T::one() {
                T::lit(0.5) * r * r
            } else {
                r.abs() - T::lit(0.5)
            }
        }
    }
}

/// d l / d pred for one element.
#[inline]
pub fn derivative<T: Real>(loss: Loss, pred: T, target: T) -> T {
    let r = pred - target;
    match loss {
        Loss::Mse => T::lit(2.0) * r,
        Loss::L1 => {
            if r > T::zero() {
                T::one()
            } else if r < T::zero() {
                -T::one()
            } else {
                T::zero()
            }
        }
        Loss::Huber => r.max(-T::one()).min(T::one()),
    }
}
