//! Activations and their derivatives, generic over f32 and f64.

use crate::config::Activation;
use num_traits::Float;

/// A float with the functions the activations need (erf is not in `num_traits`).
pub trait Real: Float + Send + Sync + 'static {
    /// The error function.
    fn erf(self) -> Self;
    /// `v` in this type.
    fn lit(v: f64) -> Self;
}

impl Real for f32 {
    #[inline]
    fn erf(self) -> f32 {
        libm::erff(self)
    }
    #[inline]
    fn lit(v: f64) -> f32 {
        v as f32
    }
}

impl Real for f64 {
    #[inline]
    fn erf(self) -> f64 {
        libm::erf(self)
    }
    #[inline]
    fn lit(v: f64) -> f64 {
        v
    }
}

#[inline]
fn sigmoid<T: Real>(z: T) -> T {
    T::one() / (T::one() + (-z).exp())
}

/// act(z).
#[inline]
pub fn apply<T: Real>(act: Activation, z: T) -> T {
    match act {
        Activation::Relu => z.max(T::zero()),
        Activation::Tanh => z.tanh(),
        Activation::Sigmoid => sigmoid(z),
        Activation::Silu => z * sigmoid(z),
        // Exact (erf) GELU, as PyTorch's and Burn's default.
        Activation::Gelu => {
            T::lit(0.5) * z * (T::one() + (z * T::lit(std::f64::consts::FRAC_1_SQRT_2)).erf())
        }
    }
}

/// d act(z) / dz.
#[inline]
pub fn derivative<T: Real>(act: Activation, z: T) -> T {
    match act {
        Activation::Relu => {
            if z > T::zero() {
                T::one()
            } else {
                T::zero()
            }
        }
        Activation::Tanh => {
            let t = z.tanh();
            T::one() - t * t
        }
        Activation::Sigmoid => {
            let s = sigmoid(z);
            s * (T::one() - s)
        }
        Activation::Silu => {
            let s = sigmoid(z);
            s * (T::one() + z * (T::one() - s))
        }
        Activation::Gelu => {
            let cdf =
                T::lit(0.5) * (T::one() + (z * T::lit(std::f64::consts::FRAC_1_SQRT_2)).erf());
            let pdf = (T::lit(-0.5) * z * z).exp() * T::lit(0.398_942_280_401_432_7);
            cdf + z * pdf
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derivatives_match_finite_differences() {
        for act in [
            Activation::Relu,
            Activation::Tanh,
            Activation::Sigmoid,
            Activation::Silu,
            Activation::Gelu,
        ] {
            for &z in &[-2.3f64, -0.7, 0.31, 1.9] {
                let h = 1e-6;
                let fd = (apply(act, z + h) - apply(act, z - h)) / (2.0 * h);
                assert!((fd - derivative(act, z)).abs() < 1e-6, "{act:?} at {z}");
            }
        }
    }
}
