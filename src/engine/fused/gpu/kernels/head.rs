//! The tensor-core pass's output layer in one sweep over the tile: the
//! outputs' dot products, the loss and the output δ, the δ of the last hidden
//! layer (written over its activations) and this unit's share of the output
//! layer's gradient — each unit on a [`CHUNK`] of one point's hidden values,
//! read and written as one 16-byte access, the chunks of a point summed by
//! plane shuffles over a power of two of lanes (widths of 48, 80, 96 or 112
//! leave some of them idle).
//!
//! Done as separate passes (a dot product split over units through shared
//! scratch, then the δs, then the gradient sums) the same work took three cube
//! barriers and one two-byte access a value, strided across rows so that four
//! lanes met in each bank (docs/results/2026-12-01-h200/profile-units/): the
//! pass is bound by shared-memory instructions, and this cuts them eightfold.
//! In SPIR-V (`Pass::spirv`) a chunk is read and written a value at a time:
//! CubeCL's vector views of shared memory come out invalid there.

use crate::config::{Activation, Loss};
use crate::engine::fused::gpu::kernels::args::Batch;
use crate::engine::fused::gpu::kernels::math::{act_bwd_at, loss_grad, loss_value};
use crate::engine::fused::gpu::kernels::mma::row_stride;
use crate::engine::fused::gpu::kernels::round::to_operand;
use cubecl::prelude::*;

/// Hidden values a unit takes of a point: eight half values, 16 bytes.
pub const CHUNK: usize = 8;

/// The output layer as compiled: the model's widths, the tile, the cube's
/// units, where the output weights start in the parameters, the activation
/// and the loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Head {
    /// Points a tile.
    pub tile: usize,
    /// Width of the hidden layers (a multiple of [`CHUNK`]).
    pub hidden: usize,
    /// Outputs a point.
    pub outputs: usize,
    /// Units of the cube (a multiple of [`Head::lanes`]).
    pub units: usize,
    /// Offset of the output weights (then biases) in the parameters.
    pub off_out: usize,
    /// Hidden-layer activation.
    pub act: Activation,
    /// The loss.
    pub loss: Loss,
    /// Compiled to SPIR-V: a chunk read and written a value at a time, the
    /// δs rounded by hand (`round::to_operand`).
    pub spirv: bool,
}

impl Head {
    /// Chunks a point's hidden values make.
    pub fn chunks(&self) -> usize {
        self.hidden / CHUNK
    }

    /// Lanes a point takes: its chunks, rounded up to a power of two (at
    /// most 16 for the widest hidden layers, 128).
    pub fn lanes(&self) -> usize {
        self.chunks().next_power_of_two()
    }

    /// Registers a unit keeps for its share of the gradient: per output,
    /// [`CHUNK`] weights, then one bias.
    pub fn slots(&self) -> usize {
        self.outputs * (CHUNK + 1)
    }
}

/// Over the tile of points from `base`, whose last hidden layer's
/// activations are at `last` in `acts` and whose targets are in `ys` (rows
/// of the outputs): the loss (this unit's part of its
/// sum is returned), the unscaled output δ, the last layer's δ over its
/// activations, and this unit's share of the output layer's gradient added
/// into `acc` ([`Head::slots`]). Every unit of the cube calls it.
#[cube]
#[allow(clippy::too_many_arguments)]
pub fn sweep<F: Float + CubeElement, E: Float>(
    acts: &mut SharedMemory<E>,
    ys: &SharedMemory<F>,
    batch: &Batch<F>,
    params: &Array<F>,
    acc: &mut Array<F>,
    base: usize,
    last: usize,
    #[comptime] h: Head,
) -> F {
    let (hidden, outputs, act, loss) = comptime!((h.hidden, h.outputs, h.act, h.loss));
    let (chunks, lanes) = comptime!((h.chunks(), h.lanes()));
    let sh = comptime!(row_stride(hidden));
    let unit = UNIT_POS as usize;
    // A unit's chunk is the same for every point it takes (units % lanes == 0).
    let c = unit % lanes;
    let mine = c < chunks;
    let j0 = c * CHUNK;
    let n = batch.count as usize;
    let mut rows = acts
        .to_slice_mut()
        .into_vectorized()
        .with_vector_size::<Const<8>>();
    let mut lsum = F::new(0.0);
    // Every lane of a plane takes an item (tile · lanes is a multiple of 32);
    // a unit's points step by a constant, and so does its chunk's index.
    let step = comptime!(h.units / lanes);
    let mut t = unit / lanes;
    let mut at = (last + t * sh + j0) / CHUNK;
    while t < comptime!(h.tile) {
        let mut a = Array::<F>::new(CHUNK);
        let mut s = Array::<F>::new(CHUNK);
        #[unroll]
        for k in 0..CHUNK {
            a[k] = F::new(0.0);
            s[k] = F::new(0.0);
        }
        if mine {
            if comptime!(!h.spirv) {
                let packed = rows[at];
                #[unroll]
                for k in 0..CHUNK {
                    a[k] = F::cast_from(packed[k]);
                }
            } else {
                #[unroll]
                for k in 0..CHUNK {
                    a[k] = F::cast_from(acts[at * CHUNK + k]);
                }
            }
        }
        let inside = base + t < n;
        #[unroll]
        for o in 0..outputs {
            let w = comptime!(h.off_out) + o * hidden + j0;
            let mut wo = Array::<F>::new(CHUNK);
            let mut z = F::new(0.0);
            #[unroll]
            for k in 0..CHUNK {
                wo[k] = F::new(0.0);
                if mine {
                    wo[k] = params[w + k];
                }
                z += wo[k] * a[k];
            }
            // The point's chunks are `lanes` neighbouring lanes.
            let mut off = 1u32;
            while (off as usize) < lanes {
                z += plane_shuffle_xor(z, off);
                off *= 2u32;
            }
            z += params[comptime!(h.off_out + outputs * hidden) + o];
            let mut d = F::new(0.0);
            if inside {
                let r = z - ys[t * outputs + o];
                d = loss_grad::<F>(r, loss);
                if c == 0 {
                    lsum += loss_value::<F>(r, loss);
                    acc[o * comptime!(CHUNK + 1) + CHUNK] += d;
                }
            }
            #[unroll]
            for k in 0..CHUNK {
                acc[o * comptime!(CHUNK + 1) + k] += d * a[k];
                s[k] += d * wo[k];
            }
        }
        let mut delta = Vector::<E, Const<8>>::empty();
        #[unroll]
        for k in 0..CHUNK {
            delta[k] = to_operand::<F, E>(s[k] * act_bwd_at::<F>(a[k], act), h.spirv);
        }
        if mine {
            if comptime!(!h.spirv) {
                rows[at] = delta;
            } else {
                #[unroll]
                for k in 0..CHUNK {
                    acts[at * CHUNK + k] = delta[k];
                }
            }
        }
        t += step;
        at += comptime!(step * sh / CHUNK);
    }
    lsum
}

/// Sums the units' shares in `acc` ([`sweep`]) and writes the output layer's
/// gradient to `partials[at..]` (weights, then biases), through `red` (a
/// value a unit). Every unit calls it.
#[cube]
pub fn flush<F: Float>(
    acc: &Array<F>,
    red: &mut SharedMemory<F>,
    partials: &mut Array<F>,
    at: usize,
    #[comptime] h: Head,
) {
    let (hidden, outputs, units) = comptime!((h.hidden, h.outputs, h.units));
    let (chunks, lanes) = comptime!((h.chunks(), h.lanes()));
    let unit = UNIT_POS as usize;
    #[unroll]
    for slot in 0..comptime!(h.slots()) {
        red[unit] = acc[slot];
        sync_cube();
        // Unit `c` < chunks sums chunk c's shares (units c, c + lanes, …).
        if unit < chunks {
            let mut total = F::new(0.0);
            let mut q = unit;
            while q < units {
                total += red[q];
                q += lanes;
            }
            let o = slot / comptime!(CHUNK + 1);
            let k = slot % comptime!(CHUNK + 1);
            if k < CHUNK {
                partials[at + o * hidden + unit * CHUNK + k] = total;
            } else if unit == 0usize {
                partials[at + comptime!(outputs * hidden) + o] = total;
            }
        }
        sync_cube();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(hidden: usize) -> Head {
        Head {
            tile: 64,
            hidden,
            outputs: 2,
            units: 256,
            off_out: 0,
            act: Activation::Relu,
            loss: Loss::Mse,
            spirv: false,
        }
    }

    #[test]
    fn a_point_takes_a_power_of_two_of_lanes_that_divides_a_plane() {
        let lanes = [16, 32, 48, 64, 96, 128].map(|w| head(w).lanes());
        assert_eq!(lanes, [2, 4, 8, 8, 16, 16]);
        // 48 wide: six chunks, two of the eight lanes idle.
        assert_eq!(head(48).chunks(), 6);
        assert_eq!(head(64).slots(), 18);
        for w in (16..=128).step_by(16) {
            assert_eq!(32 % head(w).lanes(), 0, "{w}");
        }
    }
}
