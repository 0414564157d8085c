//! A plane's strip of 16 points across a hidden layer, kept in registers in
//! the layout of `mma.sync`'s A operand, so that one layer's output *is* the
//! next product's input: the accumulators of an m16n8 pair (16 columns) are,
//! cast to half values, the A fragment of that 16-wide slice of k.
//!
//! The strip is `4 · width / 16` pairs of half values: for k-block `kb`,
//! pairs `4·kb + r` hold, per PTX's fragment layout, row `g + 8·(r % 2)` and
//! columns `16·kb + 8·(r / 2) + c`, `+ 1` of the lane's `(g, c)`
//! ([`crate::engine::fused::gpu::kernels::mma_regs::position`]). The first
//! layer is computed straight into it, each product reads it and the weights
//! (from shared memory, `ldmatrix`) and leaves the next strip; the output layer
//! ([`head`]) turns the last one into the last hidden layer's δ — the points'
//! outputs summed over a quad of lanes by two shuffles. Only what the weight
//! gradients need goes to shared memory ([`store`]).

use crate::config::{Activation, Loss};
use crate::engine::fused::gpu::kernels::args::Batch;
use crate::engine::fused::gpu::kernels::math::{act_bwd_at, act_fwd, loss_grad, loss_value};
use crate::engine::fused::gpu::kernels::mma::{row_stride, BLOCK, PLANE_UNITS};
use crate::engine::fused::gpu::kernels::mma_regs::{
    block_mma, position, weight_operand, zeros, Pairs, TILE_N,
};
use crate::engine::fused::gpu::kernels::rows::zeroed;
use cubecl::prelude::*;

/// A strip: pairs of half values, four a k-block of 16 columns.
pub type Strip<E> = Array<Vector<E, Const<2>>>;

/// Pairs of a strip of `hidden` columns.
pub fn strip_len(hidden: usize) -> usize {
    4 * hidden / BLOCK
}

/// Columns of the output layer's gradient a lane keeps, per output: the
/// plane's 8 rows of lanes share the `hidden / 8` pairs of columns.
pub fn kept(hidden: usize) -> usize {
    2 * (hidden / 8).div_ceil(8)
}

/// Row (of the plane's 16) and first column of pair `p` of a strip for the
/// lane at `(g, c)` ([`position`]): the layout of the module's note.
#[cube]
fn place(p: usize, g: usize, c: usize) -> (usize, usize) {
    let row = g + (p % 2usize) * 8usize;
    let col = (p / 4usize) * BLOCK + ((p % 4usize) / 2usize) * 8usize + c;
    (row, col)
}

/// A new strip of `hidden` columns.
#[cube]
pub fn new_strip<E: Float>(#[comptime] hidden: usize) -> Strip<E> {
    Strip::<E>::new(comptime!(strip_len(hidden)))
}

/// The A operand of k-block `kb` of `s`.
#[cube]
fn operand<E: Float>(s: &Strip<E>, #[comptime] kb: usize) -> Pairs<E> {
    let mut a = Pairs::<E>::new(4usize);
    #[unroll]
    for r in 0..4usize {
        a[r] = s[kb * 4usize + r];
    }
    a
}

/// `to = from`, pair by pair.
#[cube]
pub fn copy<E: Float>(from: &Strip<E>, to: &mut Strip<E>, #[comptime] hidden: usize) {
    #[unroll]
    for i in 0..comptime!(strip_len(hidden)) {
        to[i] = from[i];
    }
}

/// The first hidden layer of the plane's 16 points from `row0` of the tile's
/// inputs `xin`, in f32 (few inputs: no product worth the tensor cores).
#[cube]
pub fn first_layer<F: Float, E: Float>(
    xin: &SharedMemory<F>,
    params: &Array<F>,
    row0: usize,
    out: &mut Strip<E>,
    #[comptime] inputs: usize,
    #[comptime] hidden: usize,
    #[comptime] act: Activation,
) {
    let (g, c) = position((UNIT_POS % PLANE_UNITS) as usize);
    #[unroll]
    for kb in 0..comptime!(hidden / BLOCK) {
        #[unroll]
        for r in 0..4usize {
            let (row, col) = place(kb * 4usize + r, g, c);
            let t = row0 + row;
            let mut v = Vector::<E, Const<2>>::empty();
            #[unroll]
            for i in 0..2usize {
                let j = col + i;
                let mut z = params[comptime!(hidden * inputs) + j];
                #[unroll]
                for a in 0..inputs {
                    z += params[j * inputs + a] * xin[t * inputs + a];
                }
                v[i] = E::cast_from(act_fwd::<F>(z, act));
            }
            out[kb * 4usize + r] = v;
        }
    }
}

/// Writes `s` to the rows at `at` of `acts` (16 rows of `row_stride(hidden)`),
/// a four-byte store a pair.
#[cube]
pub fn store<E: Float>(
    acts: &mut SharedMemory<E>,
    s: &Strip<E>,
    at: usize,
    #[comptime] hidden: usize,
) {
    let sh = comptime!(row_stride(hidden));
    let (g, c) = position((UNIT_POS % PLANE_UNITS) as usize);
    let mut pairs = acts
        .to_slice_mut()
        .into_vectorized()
        .with_vector_size::<Const<2>>();
    #[unroll]
    for kb in 0..comptime!(hidden / BLOCK) {
        #[unroll]
        for r in 0..4usize {
            let (row, col) = place(kb * 4usize + r, g, c);
            // Even: `at`, the stride and the column are.
            pairs[(at + row * sh + col) / 2usize] = s[kb * 4usize + r];
        }
    }
}

/// One hidden-to-hidden layer for the plane's strip: forward
/// (`below` false) `out = act(a·Wᵀ + b)`, the bias at `bias_at` of
/// `params`; backward `out = (a·W) ⊙ act'(a_below)`, `a` a δ and the layer
/// below's activations at `below_at` of `acts`. `w`: the weights, rows of `ws`;
/// `group` output blocks of 16 at a time (more share each A fragment, fewer
/// accumulators live).
#[cube]
#[allow(clippy::too_many_arguments)]
pub fn layer<F: Float, E: Float>(
    a: &Strip<E>,
    w: &Slice<E>,
    params: &Array<F>,
    acts: &mut SharedMemory<E>,
    at: usize,
    out: &mut Strip<E>,
    #[comptime] hidden: usize,
    #[comptime] ws: usize,
    #[comptime] act: Activation,
    #[comptime] below: bool,
    #[comptime] group: usize,
) {
    let nb = comptime!(hidden / BLOCK);
    let sh = comptime!(row_stride(hidden));
    let (g, c) = position((UNIT_POS % PLANE_UNITS) as usize);
    let pairs = acts
        .to_slice_mut()
        .into_vectorized()
        .with_vector_size::<Const<2>>();
    #[unroll]
    for qg in 0..comptime!(nb / group) {
        let mut accs = zeros::<F>(group);
        #[unroll]
        for k in 0..nb {
            let ak = operand::<E>(a, k);
            #[unroll]
            for q in 0..group {
                let n0 = (qg * group + q) * BLOCK;
                let r = weight_operand::<F, E>(w, k * BLOCK, n0, ws, below);
                block_mma::<F, E>(&ak, &r, &mut accs, q);
            }
        }
        #[unroll]
        for q in 0..group {
            let kb = qg * group + q;
            #[unroll]
            for h in 0..2usize {
                let acc = accs.index(2usize * q + h);
                let n = kb * BLOCK + h * TILE_N + c;
                let mut bias = Vector::<F, Const<2>>::empty();
                if comptime!(!below) {
                    bias[0] = params[at + n];
                    bias[1] = params[at + n + 1usize];
                }
                #[unroll]
                for r in 0..2usize {
                    let v = acc[r];
                    let mut o = Vector::<E, Const<2>>::empty();
                    if comptime!(!below) {
                        o[0] = E::cast_from(act_fwd::<F>(v[0] + bias[0], act));
                        o[1] = E::cast_from(act_fwd::<F>(v[1] + bias[1], act));
                    } else {
                        let x = pairs[(at + (g + r * 8usize) * sh + n) / 2usize];
                        o[0] = E::cast_from(v[0] * act_bwd_at::<F>(F::cast_from(x[0]), act));
                        o[1] = E::cast_from(v[1] * act_bwd_at::<F>(F::cast_from(x[1]), act));
                    }
                    // Row half `r`, column half `h`: pair 2·h + r of the k-block.
                    out[kb * 4usize + h * 2usize + r] = o;
                }
            }
        }
    }
}

/// The output layer as compiled for a strip.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StripHead {
    /// Width of the hidden layers.
    pub hidden: usize,
    /// Outputs a point.
    pub outputs: usize,
    /// Offset of the output weights (then biases) in the parameters.
    pub off_out: usize,
    /// Hidden-layer activation.
    pub act: Activation,
    /// The loss.
    pub loss: Loss,
    /// Whether the batch lists its points.
    pub use_idx: bool,
}

/// The output layer over the plane's strip `a` (the last hidden layer) of
/// the points from `first` of `batch`, their targets in `ys`
/// ([`crate::engine::fused::gpu::kernels::strips`] loads them): the unscaled output δ, the last
/// layer's δ into `delta`; per output, the sum of δ (`sums[o]`), the loss
/// (`sums[outputs]`) and this lane's [`kept`] columns of the output layer's
/// gradient (`grads[o · kept ..]`: column pair `m` of the row is kept by
/// the lanes of row `m % 8`).
#[cube]
#[allow(clippy::too_many_arguments)]
pub fn head<F: Float + CubeElement, E: Float>(
    a: &Strip<E>,
    ys: &Array<F>,
    batch: &Batch<F>,
    params: &Array<F>,
    first: usize,
    delta: &mut Strip<E>,
    sums: &mut Array<F>,
    grads: &mut Array<F>,
    #[comptime] h: StripHead,
) {
    let (hidden, outputs, off_out) = comptime!((h.hidden, h.outputs, h.off_out));
    let len = comptime!(strip_len(hidden));
    let keep = comptime!(kept(hidden));
    let (g, c) = position((UNIT_POS % PLANE_UNITS) as usize);
    let n = batch.count as usize;
    // Σ_o δ_o·w[o, j], per value of the strip.
    let mut s = zeroed::<F>(comptime!(2 * len));
    #[unroll]
    for o in 0..outputs {
        let wo = off_out + o * hidden;
        let mut z = Array::<F>::new(2usize);
        z[0] = F::new(0.0);
        z[1] = F::new(0.0);
        #[unroll]
        for p in 0..len {
            let (_, col) = place(p, g, c);
            let v = a[p];
            z[p % 2usize] += params[wo + col] * F::cast_from(v[0])
                + params[wo + col + 1usize] * F::cast_from(v[1]);
        }
        let mut d = Array::<F>::new(2usize);
        #[unroll]
        for r in 0..2usize {
            // The row's columns are spread over the four lanes of a quad.
            let mut zr = z[r];
            zr += plane_shuffle_xor(zr, 1u32);
            zr += plane_shuffle_xor(zr, 2u32);
            zr += params[comptime!(off_out + outputs * hidden) + o];
            d[r] = F::new(0.0);
            let i = first + g + r * 8usize;
            if i < n {
                let res = zr - ys[o * 2usize + r];
                d[r] = loss_grad::<F>(res, comptime!(h.loss));
                if c == 0usize {
                    sums[outputs] += loss_value::<F>(res, comptime!(h.loss));
                    sums[o] += d[r];
                }
            }
        }
        #[unroll]
        for p in 0..len {
            let (_, col) = place(p, g, c);
            let dr = d[p % 2usize];
            s[2usize * p] += dr * params[wo + col];
            s[2usize * p + 1usize] += dr * params[wo + col + 1usize];
        }
        // The output layer's gradient: column pair m over the plane's 16
        // rows, summed over the 8 rows of lanes, kept by row m % 8.
        #[unroll]
        for m in 0..comptime!(hidden / 8) {
            let p = (m / 2usize) * 4usize + (m % 2usize) * 2usize;
            let lo = a[p];
            let hi = a[p + 1usize];
            #[unroll]
            for i in 0..2usize {
                let mut v = d[0] * F::cast_from(lo[i]) + d[1] * F::cast_from(hi[i]);
                v += plane_shuffle_xor(v, 4u32);
                v += plane_shuffle_xor(v, 8u32);
                v += plane_shuffle_xor(v, 16u32);
                if g == m % 8usize {
                    grads[o * keep + (m / 8usize) * 2usize + i] += v;
                }
            }
        }
    }
    #[unroll]
    for p in 0..len {
        let v = a[p];
        let mut o = Vector::<E, Const<2>>::empty();
        #[unroll]
        for i in 0..2usize {
            let x = F::cast_from(v[i]);
            o[i] = E::cast_from(s[2usize * p + i] * act_bwd_at::<F>(x, comptime!(h.act)));
        }
        delta[p] = o;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_strip_holds_its_sixteen_rows_over_a_plane() {
        // 16 rows × width values, two a pair, over 32 lanes.
        for w in (16..=128).step_by(16) {
            assert_eq!(strip_len(w) * 2 * 32, 16 * w, "{w}");
        }
        // Every column pair of the output gradient has one keeper.
        assert_eq!([16, 64, 128].map(kept), [2, 2, 4]);
        for w in (16..=128).step_by(16) {
            assert!(kept(w) / 2 * 8 >= w / 8, "{w}");
        }
    }
}
