//! Pointwise device math of the fused GPU kernels: activations and losses
//! with their derivatives, and the optimizer update of one parameter — the
//! same rules as the CPU engine's `optim`.

use crate::config::{Activation, Loss, OptimizerKind};
use crate::engine::fused::gpu::kernels::args::Rule;
use crate::engine::fused::gpu::shape::{is_adam, keeps_z};
use cubecl::prelude::*;

/// act(z).
#[cube]
pub fn act_fwd<F: Float>(z: F, #[comptime] act: Activation) -> F {
    if comptime!(act == Activation::Relu) {
        if z > F::new(0.0) {
            z
        } else {
            F::new(0.0)
        }
    } else if comptime!(act == Activation::Tanh) {
        F::tanh(z)
    } else if comptime!(act == Activation::Sigmoid) {
        F::new(1.0) / (F::new(1.0) + F::exp(F::new(0.0) - z))
    } else if comptime!(act == Activation::Silu) {
        z / (F::new(1.0) + F::exp(F::new(0.0) - z))
    } else {
        F::new(0.5) * z * (F::new(1.0) + F::erf(z * F::new(0.70710677)))
    }
}

/// d act(z) / dz.
#[cube]
pub fn act_bwd<F: Float>(z: F, #[comptime] act: Activation) -> F {
    if comptime!(act == Activation::Relu) {
        if z > F::new(0.0) {
            F::new(1.0)
        } else {
            F::new(0.0)
        }
    } else if comptime!(act == Activation::Tanh) {
        let t = F::tanh(z);
        F::new(1.0) - t * t
    } else if comptime!(act == Activation::Sigmoid) {
        let s = F::new(1.0) / (F::new(1.0) + F::exp(F::new(0.0) - z));
        s * (F::new(1.0) - s)
    } else if comptime!(act == Activation::Silu) {
        let s = F::new(1.0) / (F::new(1.0) + F::exp(F::new(0.0) - z));
        s * (F::new(1.0) + z * (F::new(1.0) - s))
    } else {
        let cdf = F::new(0.5) * (F::new(1.0) + F::erf(z * F::new(0.70710677)));
        cdf + z * F::exp(F::new(-0.5) * z * z) * F::new(0.398_942_3)
    }
}

/// d act / dz from the stored value `v`: z when [`keeps_z`], else act(z).
#[cube]
pub fn act_bwd_at<F: Float>(v: F, #[comptime] act: Activation) -> F {
    if comptime!(keeps_z(act)) {
        act_bwd::<F>(v, act)
    } else if comptime!(act == Activation::Relu) {
        if v > F::new(0.0) {
            F::new(1.0)
        } else {
            F::new(0.0)
        }
    } else if comptime!(act == Activation::Tanh) {
        F::new(1.0) - v * v
    } else {
        v * (F::new(1.0) - v)
    }
}

/// Loss of residual r (Huber with delta 1).
#[cube]
pub fn loss_value<F: Float>(r: F, #[comptime] loss: Loss) -> F {
    if comptime!(loss == Loss::Mse) {
        r * r
    } else if comptime!(loss == Loss::L1) {
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
pub fn loss_grad<F: Float>(r: F, #[comptime] loss: Loss) -> F {
    if comptime!(loss == Loss::Mse) {
        F::new(2.0) * r
    } else if comptime!(loss == Loss::L1) {
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
#[cube]
pub fn new_m<F: Float + CubeElement>(
    p: F,
    g: F,
    m: F,
    rule: &Rule<F>,
    #[comptime] opt: OptimizerKind,
) -> F {
    let wd = rule.wd;
    let mut out = m;
    if comptime!(opt == OptimizerKind::Momentum) {
        out = g + wd * p;
        if rule.first == 0u32 {
            out += F::new(0.9) * m;
        }
    } else if comptime!(is_adam(opt)) {
        let mut gg = g;
        if comptime!(opt == OptimizerKind::Adam) {
            gg = g + wd * p;
        }
        out = F::new(0.9) * m + F::new(0.1) * gg;
    }
    out
}

/// Second moment after a step with gradient `g` (Adam, AdamW).
#[cube]
pub fn new_v<F: Float + CubeElement>(
    p: F,
    g: F,
    v: F,
    rule: &Rule<F>,
    #[comptime] opt: OptimizerKind,
) -> F {
    let wd = rule.wd;
    let mut out = v;
    if comptime!(is_adam(opt)) {
        let mut gg = g;
        if comptime!(opt == OptimizerKind::Adam) {
            gg = g + wd * p;
        }
        out = F::new(0.999) * v + F::new(0.001) * gg * gg;
    }
    out
}

/// The parameter after a step, given the moments [`new_m`] and [`new_v`] returned.
#[cube]
pub fn new_p<F: Float + CubeElement>(
    p: F,
    m: F,
    v: F,
    g: F,
    rule: &Rule<F>,
    #[comptime] opt: OptimizerKind,
) -> F {
    let lr = rule.lr;
    let wd = rule.wd;
    let mut out = p - lr * (g + wd * p);
    if comptime!(opt == OptimizerKind::Momentum) {
        out = p - lr * m;
    } else if comptime!(is_adam(opt)) {
        let update = (m / rule.bias1) / (F::sqrt(v / rule.bias2) + F::new(0.00000001));
        let mut decayed = p;
        if comptime!(opt == OptimizerKind::Adamw) {
            decayed = p * (F::new(1.0) - lr * wd);
        }
        out = decayed - lr * update;
    }
    out
}
