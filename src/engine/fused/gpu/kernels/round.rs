//! Half-precision operands emulated on the f32 kernels: a value rounded to
//! the nearest bf16 or f16 (ties to even), kept as f32 — what
//! [`crate::engine::fused::half::Half::round`] computes on the CPU, in bit
//! arithmetic that every shader compiler takes (WGSL has no bf16, and f16
//! only as an optional feature): the weights once a step ([`round_params`]),
//! the activations and δs as the tiled kernel stores them ([`operand`]).

use crate::engine::fused::gpu::shape::Shape;
use crate::engine::fused::half::Half;
use cubecl::ir::{ElemType, FloatKind};
use cubecl::prelude::*;

/// Smallest positive normal f16, 2⁻¹⁴.
const F16_MIN_NORMAL: f32 = 6.103_515_6e-5;
/// Halfway between the largest f16 (65504) and the next step: from here up
/// a value rounds to infinity.
const F16_OVERFLOW: f32 = 65_520.0;
/// 2²⁴: f16's subnormals are the multiples of 2⁻²⁴.
const F16_SUBNORMAL_STEPS: f32 = 16_777_216.0;

/// `v` (an f32) rounded to the nearest value of `half`, as f32; with None, `v`.
#[cube]
pub fn round_to<F: Float>(v: F, #[comptime] half: Option<Half>) -> F {
    if comptime!(half == Some(Half::Bf16)) {
        // bf16 is f32's top 16 bits: add half of the dropped bits' weight,
        // less one unless the kept part is odd (ties to even), and cut.
        let b = u32::reinterpret(v);
        F::reinterpret((b + 0x7FFFu32 + ((b >> 16u32) & 1u32)) & 0xFFFF_0000u32)
    } else if comptime!(half == Some(Half::F16)) {
        // Every case computed and the right one selected: no branch a lane
        // can take alone. The tensor-core pass on Vulkan rounds every
        // operand here; with branches, f16 took 430 ms at 3 × 64 where bf16
        // took 296 ms (docs/PERFORMANCE.md, "Tensor cores on Vulkan").
        let a = F::abs(v);
        let b = u32::reinterpret(v);
        // Normal: 10 bits of mantissa kept of f32's 23, as for bf16.
        let normal = F::reinterpret((b + 0xFFFu32 + ((b >> 13u32) & 1u32)) & 0xFFFF_E000u32);
        // Subnormal: the nearest multiple of 2⁻²⁴.
        let sub = F::round(v * F::new(F16_SUBNORMAL_STEPS)) / F::new(F16_SUBNORMAL_STEPS);
        // Past the largest f16: infinity of v's sign.
        let inf = F::reinterpret((b & 0x8000_0000u32) | 0x7F80_0000u32);
        let r = select(a < F::new(F16_MIN_NORMAL), sub, normal);
        let r = select(a >= F::new(F16_OVERFLOW), inf, r);
        // A NaN stays itself.
        select((b & 0x7FFF_FFFFu32) > 0x7F80_0000u32, v, r)
    } else {
        v
    }
}

/// The half-precision type `E` is, if it is one.
pub fn half_of<E: CubePrimitive>() -> Option<Half> {
    match E::as_type_native_unchecked().elem_type() {
        ElemType::Float(FloatKind::BF16) => Some(Half::Bf16),
        ElemType::Float(FloatKind::F16) => Some(Half::F16),
        _ => None,
    }
}

/// `v` converted to the operand type `E`, rounded to the nearest value (ties
/// to even) by hand first where `by_hand`: SPIR-V leaves the rounding of a
/// narrowing conversion to the driver.
#[cube]
pub fn to_operand<F: Float, E: Float>(v: F, #[comptime] by_hand: bool) -> E {
    if comptime!(by_hand) {
        E::cast_from(round_to::<F>(v, comptime!(half_of::<E>())))
    } else {
        E::cast_from(v)
    }
}

/// `v` as it is stored: rounded to `half` when it is an operand (`round`).
#[cube]
pub fn operand<F: Float>(v: F, round: bool, #[comptime] half: Option<Half>) -> F {
    if comptime!(half.is_some()) {
        select(round, round_to::<F>(v, half), v)
    } else {
        v
    }
}

/// Adds `g` into entry `i` of the partial rows (writes it on the cube's
/// `first` tile); with emulated half precision (`half`), times `end`: the
/// batch's scale on the cube's last tile, else 1 — the δs were not scaled,
/// so that none is too small for f16.
#[cube]
pub fn add_to_row<F: Float>(
    partials: &mut Array<F>,
    i: usize,
    g: F,
    first: bool,
    end: F,
    #[comptime] half: Option<Half>,
) {
    let before = row_before::<F>(partials, i, first);
    put_row::<F>(partials, i, g, before, first, end, half);
}

/// What entry `i` of the partial rows holds before a tile adds into it (0
/// on the cube's `first` tile, which writes the row): read ahead of the
/// tile's sums, its latency is hidden behind them.
#[cube]
pub fn row_before<F: Float>(partials: &Array<F>, i: usize, first: bool) -> F {
    let mut v = F::new(0.0);
    if !first {
        v = partials[i];
    }
    v
}

/// [`add_to_row`] with the entry read beforehand ([`row_before`]): the same
/// arithmetic, bit for bit.
#[cube]
pub fn put_row<F: Float>(
    partials: &mut Array<F>,
    i: usize,
    g: F,
    before: F,
    first: bool,
    end: F,
    #[comptime] half: Option<Half>,
) {
    if comptime!(half.is_some()) {
        let mut v = g;
        if !first {
            v += before;
        }
        partials[i] = v * end;
    } else if first {
        partials[i] = g;
    } else {
        partials[i] = before + g;
    }
}

/// `params` into `out` with the hidden-to-hidden weights rounded to `half`
/// (biases, first and output layers as they are): the weights the emulated
/// products read, made once a step.
#[cube(launch_unchecked)]
pub fn round_params<F: Float + CubeElement>(
    params: &Array<F>,
    out: &mut Array<F>,
    #[comptime] shape: Shape,
    #[comptime] half: Option<Half>,
) {
    let (inputs, hidden, layers) = comptime!((shape.inputs, shape.hidden, shape.layers));
    let off1 = comptime!(hidden * inputs + hidden);
    let hh = comptime!(hidden * hidden + hidden);
    let i = ABSOLUTE_POS;
    if i < params.len() {
        let v = params[i];
        let mut w = v;
        // Weights (not biases) of layers 1 … L−1.
        let inner = i >= off1 && i < comptime!(off1 + (layers - 1) * hh);
        if inner && (i - off1) % hh < comptime!(hidden * hidden) {
            w = round_to::<F>(v, half);
        }
        out[i] = w;
    }
}
