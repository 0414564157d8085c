//! Pointwise device math of the fused GPU kernels: activations and losses
//! with their derivatives, and the optimizer update of one parameter — the
//! same rules as the CPU engine's `optim`.

use cubecl::prelude::*;

/// act(z). `act`: 0 relu, 1 tanh, 2 sigmoid, 3 silu, 4 gelu.
#[cube]
pub fn act_fwd<F: Float>(z: F, #[comptime] act: u32) -> F {
    if act == 0 {
        if z > F::new(0.0) {
            z
        } else {
            F::new(0.0)
        }
    } else if act == 1 {
        F::tanh(z)
    } else if act == 2 {
        F::new(1.0) / (F::new(1.0) + F::exp(F::new(0.0) - z))
    } else if act == 3 {
        z / (F::new(1.0) + F::exp(F::new(0.0) - z))
    } else {
        F::new(0.5) * z * (F::new(1.0) + F::erf(z * F::new(0.70710677)))
    }
}

/// d act(z) / dz.
#[cube]
pub fn act_bwd<F: Float>(z: F, #[comptime] act: u32) -> F {
    if act == 0 {
        if z > F::new(0.0) {
            F::new(1.0)
        } else {
            F::new(0.0)
        }
    } else if act == 1 {
        let t = F::tanh(z);
        F::new(1.0) - t * t
    } else if act == 2 {
        let s = F::new(1.0) / (F::new(1.0) + F::exp(F::new(0.0) - z));
        s * (F::new(1.0) - s)
    } else if act == 3 {
        let s = F::new(1.0) / (F::new(1.0) + F::exp(F::new(0.0) - z));
        s * (F::new(1.0) + z * (F::new(1.0) - s))
    } else {
        let cdf = F::new(0.5) * (F::new(1.0) + F::erf(z * F::new(0.70710677)));
        cdf + z * F::exp(F::new(-0.5) * z * z) * F::new(0.398_942_3)
    }
}

/// Whether d act / dz needs z itself (silu, gelu); the others follow from act(z).
pub fn keeps_z(act: u32) -> bool {
    act >= 3
}

/// d act / dz from the stored value `v`: z when [`keeps_z`], else act(z).
#[cube]
pub fn act_bwd_at<F: Float>(v: F, #[comptime] act: u32) -> F {
    if comptime!(keeps_z(act)) {
        act_bwd::<F>(v, act)
    } else if act == 0 {
        if v > F::new(0.0) {
            F::new(1.0)
        } else {
            F::new(0.0)
        }
    } else if act == 1 {
        F::new(1.0) - v * v
    } else {
        v * (F::new(1.0) - v)
    }
}

/// Loss of residual r. `loss`: 0 mse, 1 l1, 2 huber (delta 1).
#[cube]
pub fn loss_value<F: Float>(r: F, #[comptime] loss: u32) -> F {
    if loss == 0 {
        r * r
    } else if loss == 1 {
        F::abs(r)
    } else {
        let a = F::abs(r);
        if a < F::new(1.0) {
            F::new(0.5) * a * a
        } else {
            a - F::new(0.5)
        }
    }
}

/// d loss / d prediction.
#[cube]
pub fn loss_grad<F: Float>(r: F, #[comptime] loss: u32) -> F {
    if loss == 0 {
        F::new(2.0) * r
    } else if loss == 1 {
        if r > F::new(0.0) {
            F::new(1.0)
        } else if r < F::new(0.0) {
            F::new(-1.0)
        } else {
            F::new(0.0)
        }
    } else {
        F::clamp(r, F::new(-1.0), F::new(1.0))
    }
}

/// First moment after a step with gradient `g` (momentum: the velocity).
/// `opt`: 0 sgd, 1 momentum, 2 adam, 3 adamw.
#[cube]
pub fn new_m<F: Float>(p: F, g: F, m: F, wd: F, first: bool, #[comptime] opt: u32) -> F {
    let mut out = m;
    if opt == 1 {
        out = g + wd * p;
        if !first {
            out += F::new(0.9) * m;
        }
    } else if opt >= 2 {
        let mut gg = g;
        if opt == 2 {
            gg = g + wd * p;
        }
        out = F::new(0.9) * m + F::new(0.1) * gg;
    }
    out
}

/// Second moment after a step with gradient `g` (Adam, AdamW).
#[cube]
pub fn new_v<F: Float>(p: F, g: F, v: F, wd: F, #[comptime] opt: u32) -> F {
    let mut out = v;
    if opt >= 2 {
        let mut gg = g;
        if opt == 2 {
            gg = g + wd * p;
        }
        out = F::new(0.999) * v + F::new(0.001) * gg * gg;
    }
    out
}

/// The parameter after a step, given the moments [`new_m`] and [`new_v`] returned.
#[cube]
#[allow(clippy::too_many_arguments)]
pub fn new_p<F: Float>(
    p: F,
    m: F,
    v: F,
    g: F,
    lr: F,
    wd: F,
    bias1: F,
    bias2: F,
    #[comptime] opt: u32,
) -> F {
    let mut out = p - lr * (g + wd * p);
    if opt == 1 {
        out = p - lr * m;
    } else if opt >= 2 {
        let update = (m / bias1) / (F::sqrt(v / bias2) + F::new(0.00000001));
        let mut decayed = p;
        if opt == 3 {
            decayed = p * (F::new(1.0) - lr * wd);
        }
        out = decayed - lr * update;
    }
    out
}
