//! The tensor-core pass's first hidden layer, f32 on CUDA cores: few
//! inputs a point, so no matrix product — `z = W·x + b`, the activation,
//! stored as the operand type into the tile's first row set. Where the
//! width splits evenly over the cube, each unit always takes the same two
//! neighbouring hidden units, keeps their weights in registers and writes
//! both values as one four-byte store (half the stores and index
//! arithmetic of one value a unit; in SPIR-V, where CubeCL's vector views of
//! shared memory are invalid, two stores); else one value an element,
//! weights read from the parameters.

use crate::config::Activation;
use crate::engine::fused::gpu::kernels::math::act_fwd;
use crate::engine::fused::gpu::kernels::mma::row_stride;
use crate::engine::fused::gpu::kernels::round::to_operand;
use cubecl::prelude::*;

/// Whether the units of a cube take fixed pairs of hidden units.
pub fn paired(hidden: usize, units: usize) -> bool {
    hidden.is_multiple_of(2) && units.is_multiple_of(hidden / 2)
}

/// The first layer's weights (then bias) of this unit's two hidden units,
/// where [`paired`]; else nothing is read.
#[cube]
pub fn weights<F: Float>(
    params: &Array<F>,
    #[comptime] inputs: usize,
    #[comptime] hidden: usize,
    #[comptime] units: usize,
) -> Array<F> {
    let mut w = Array::<F>::new(comptime!(2 * (inputs + 1)));
    if comptime!(paired(hidden, units)) {
        let j = (UNIT_POS as usize % comptime!(hidden / 2)) * 2usize;
        #[unroll]
        for h in 0..2usize {
            #[unroll]
            for a in 0..inputs {
                w[h * comptime!(inputs + 1) + a] = params[(j + h) * inputs + a];
            }
            w[h * comptime!(inputs + 1) + inputs] = params[comptime!(hidden * inputs) + j + h];
        }
    }
    w
}

/// The tile's first hidden layer into `acts` (rows of [`row_stride`]) from
/// the inputs `xin` (`tile` rows of `inputs`) by the cube's `units`; `w`
/// from [`weights`]; for SPIR-V (`spirv`) a pair's values stored one by
/// one and rounded by hand (`round::to_operand`), else as one vector.
#[cube]
#[allow(clippy::too_many_arguments)]
pub fn layer<F: Float, E: Float>(
    acts: &mut SharedMemory<E>,
    xin: &SharedMemory<F>,
    params: &Array<F>,
    w: &Array<F>,
    #[comptime] inputs: usize,
    #[comptime] hidden: usize,
    #[comptime] tile: usize,
    #[comptime] units: usize,
    #[comptime] act: Activation,
    #[comptime] spirv: bool,
) {
    let sh = comptime!(row_stride(hidden));
    let unit = UNIT_POS as usize;
    if comptime!(paired(hidden, units)) {
        let half_w = comptime!(hidden / 2);
        let j = (unit % half_w) * 2usize;
        // The unit's points step by a constant (the half width divides the
        // cube), and so does its pair index: no division or product a point.
        let step = comptime!(units / half_w);
        let mut t = unit / half_w;
        if comptime!(!spirv) {
            let mut pairs = acts
                .to_slice_mut()
                .into_vectorized()
                .with_vector_size::<Const<2>>();
            let mut at = (t * sh + j) / 2usize;
            while t < tile {
                // Even: the row stride and j are.
                pairs[at] = pair::<F, E>(w, xin, t, inputs, act, false);
                t += step;
                at += comptime!(step * sh / 2);
            }
        } else {
            let mut at = t * sh + j;
            while t < tile {
                let out = pair::<F, E>(w, xin, t, inputs, act, true);
                acts[at] = out[0];
                acts[at + 1] = out[1];
                t += step;
                at += comptime!(step * sh);
            }
        }
    } else {
        let mut e = unit;
        while e < comptime!(tile * hidden) {
            let t = e / hidden;
            let j = e % hidden;
            let mut z = params[comptime!(hidden * inputs) + j];
            #[unroll]
            for a in 0..inputs {
                z += params[j * inputs + a] * xin[t * inputs + a];
            }
            acts[t * sh + j] = to_operand::<F, E>(act_fwd::<F>(z, act), spirv);
            e += units;
        }
    }
}

/// The activations of this unit's two hidden units at point `t`, from the
/// weights `w` ([`weights`]), rounded by hand where `by_hand`.
#[cube]
fn pair<F: Float, E: Float>(
    w: &Array<F>,
    xin: &SharedMemory<F>,
    t: usize,
    #[comptime] inputs: usize,
    #[comptime] act: Activation,
    #[comptime] by_hand: bool,
) -> Vector<E, Const<2>> {
    let mut out = Vector::<E, Const<2>>::empty();
    #[unroll]
    for h in 0..2usize {
        let mut z = w[h * comptime!(inputs + 1) + inputs];
        #[unroll]
        for a in 0..inputs {
            z += w[h * comptime!(inputs + 1) + a] * xin[t * inputs + a];
        }
        out[h] = to_operand::<F, E>(act_fwd::<F>(z, act), by_hand);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_take_fixed_pairs_where_the_half_width_divides_the_cube() {
        assert!(paired(128, 256) && paired(64, 256) && paired(16, 256));
        // 48 wide: 24 pairs do not divide 256 units.
        assert!(!paired(48, 256));
        assert!(paired(128, 512) && !paired(96, 256));
    }
}
