//! The tensor-core products of [`crate::engine::fused::gpu::kernels::mma`],
//! on registers: CubeCL's manual MMA (`mma.sync` m16n8k16 on CUDA) with its
//! operands loaded by `ldmatrix` from shared memory, so that each 16×16
//! output block is finished — bias, activation, its derivative, the partial
//! row — from the accumulator registers themselves, not through a scratch
//! block in shared memory element by element. Same products, same work split
//! over the planes ([`split`]), same results up to the order of f32 sums.
//!
//! A 16×16 block is two m16n8 tiles. A lane holds, of each m16n8
//! accumulator, two neighbouring columns of two rows eight apart (PTX's
//! layout, as the runtime's `position_of_nth` also gives it), so the
//! epilogues read and write them as pairs — one four-byte access for two
//! half values, one bias load for two rows. Which rows a lane points
//! `ldmatrix` at follows PTX's fragment layouts too: an A operand (16×16, row-major) is four
//! 8×8 matrices in the order rows 0–7 / 8–15 of columns 0–7, then of columns
//! 8–15; a B operand of two n8 tiles is four, k 0–7 / 8–15 of the first tile,
//! then of the second. Operands stored the other way round load transposed.

use crate::engine::fused::gpu::kernels::colsums::{self, Cols};
use crate::engine::fused::gpu::kernels::layers::{At, Layer};
use crate::engine::fused::gpu::kernels::math::{act_bwd_at, act_fwd};
use crate::engine::fused::gpu::kernels::mma::{
    origin, row_stride, scratch_to_partials, split_blocks, Split, BLOCK, PLANE_UNITS,
};
use crate::engine::fused::gpu::kernels::rows;
use cubecl::cmma::{MatrixIdent, MmaDefinition};
use cubecl::prelude::*;

/// Registers of one operand or accumulator piece: pairs of values.
pub type Pairs<T> = Array<Vector<T, Const<2>>>;

/// Columns of an m16n8 tile.
pub const TILE_N: usize = 8;

/// The m16n8k16 product of `E` operands into `F`.
#[cube]
fn definition<F: Float, E: Float>() -> MmaDefinition<E, E, F> {
    MmaDefinition::<E, E, F>::new(BLOCK, TILE_N, BLOCK)
}

/// Two zeroed m16n8 f32 accumulators a block, for `count` blocks.
#[cube]
pub fn zeros<F: Float>(#[comptime] count: usize) -> Sequence<Pairs<F>> {
    let mut accs = Sequence::new();
    #[unroll]
    for _ in 0..comptime!(2 * count) {
        let mut c = Pairs::<F>::new(2usize);
        c[0] = Vector::new(F::new(0.0));
        c[1] = Vector::new(F::new(0.0));
        accs.push(c);
    }
    accs
}

/// The four 8×8 matrices `ldmatrix` loads for a 16×16 operand at `at` in
/// `from` (rows of `stride`): the lane's row start is `at + r·stride + c`,
/// `r` and `c` as the caller lays the four matrices out.
#[cube]
pub fn load4<F: Float, E: Float>(
    from: &Slice<E>,
    at: usize,
    #[comptime] ident: MatrixIdent,
    #[comptime] transpose: bool,
) -> Pairs<E> {
    let def = definition::<F, E>();
    def.load_matrix::<E, Const<2>>(&from.slice(at, at + 8usize), ident, 4usize, transpose)
}

/// Pairs `i` and `i + 1` of `r` as one m16n8 B operand.
#[cube]
fn half_of<E: Float>(r: &Pairs<E>, #[comptime] i: usize) -> Pairs<E> {
    let mut b = Pairs::<E>::new(2usize);
    b[0] = r[i];
    b[1] = r[i + 1];
    b
}

/// `acc += a·b` for one m16n8 tile.
#[cube]
fn mma<F: Float, E: Float>(a: &Pairs<E>, b: &Pairs<E>, acc: &mut Pairs<F>) {
    let def = definition::<F, E>();
    def.execute_inplace::<Const<2>, Const<2>, Const<2>>(a, b, acc);
}

/// `accs[2q]`, `accs[2q + 1]` += `a`·`r` for one 16×16 B operand `r` (its
/// two m16n8 tiles).
#[cube]
pub fn block_mma<F: Float, E: Float>(
    a: &Pairs<E>,
    r: &Pairs<E>,
    accs: &mut Sequence<Pairs<F>>,
    #[comptime] q: usize,
) {
    mma::<F, E>(a, &half_of::<E>(r, 0usize), accs.index_mut(2usize * q));
    mma::<F, E>(
        a,
        &half_of::<E>(r, 2usize),
        accs.index_mut(2usize * q + 1usize),
    );
}

/// The 16×16 B operand at rows `k0`, columns `n0` of a product by the
/// hidden weights `w` (rows of `ws`): forward `B[k, n] = W[n, k]` (W's rows
/// hold k, as B wants), with `below` (δ times the weights) `B[k, n] = W[k, n]`,
/// loaded transposed.
#[cube]
pub fn weight_operand<F: Float, E: Float>(
    w: &Slice<E>,
    k0: usize,
    n0: usize,
    #[comptime] ws: usize,
    #[comptime] below: bool,
) -> Pairs<E> {
    let l = (UNIT_POS % PLANE_UNITS) as usize;
    if comptime!(!below) {
        let at_w =
            (n0 + l % 8usize + (l / 16usize) * 8usize) * ws + k0 + ((l / 8usize) % 2usize) * 8usize;
        load4::<F, E>(w, at_w, MatrixIdent::B, false)
    } else {
        let at_w =
            (k0 + l % 8usize + ((l / 8usize) % 2usize) * 8usize) * ws + n0 + (l / 16usize) * 8usize;
        load4::<F, E>(w, at_w, MatrixIdent::B, true)
    }
}

/// Lane `lane`'s first row (`.0`; the second is 8 below) and first column
/// (`.1`; the second is next to it) in an m16n8 accumulator: pair 0 of the
/// accumulator is that row, pair 1 the row 8 below.
#[cube]
pub fn position(lane: usize) -> (usize, usize) {
    (lane / 4usize, (lane % 4usize) * 2usize)
}

/// [`crate::engine::fused::gpu::kernels::mma::product`] on registers.
/// Going down with `sums`, it also adds the column sums of the δ it makes
/// into `kept` ([`colsums`]): sum `which` (the bias of the layer below) and,
/// with `first` (the layer below is the first hidden layer), the first
/// layer's weight sums (δ·x, the inputs `xin`) — whose δ rows nothing else
/// reads then, so they are not stored.
#[cube]
#[allow(clippy::too_many_arguments)]
pub fn product<F: Float, E: Float>(
    acts: &mut SharedMemory<E>,
    w: &Slice<E>,
    params: &Array<F>,
    at: &At,
    below_a: usize,
    kept: &mut Array<F>,
    xin: &SharedMemory<F>,
    which: usize,
    #[comptime] layer: Layer,
    #[comptime] ws: usize,
    #[comptime] planes: usize,
    #[comptime] sums: Option<Cols>,
    #[comptime] first: bool,
) {
    let hidden = comptime!(layer.out_w);
    let act = comptime!(layer.act);
    let sh = comptime!(row_stride(hidden));
    let nb = comptime!(hidden / BLOCK);
    let sp = comptime!(split_blocks(nb, layer.tile / BLOCK, planes));
    let (rg, g, work) = comptime!((sp.rows, sp.group, sp.items));
    let plane = (UNIT_POS / PLANE_UNITS) as usize;
    let l = (UNIT_POS % PLANE_UNITS) as usize;
    let source = acts.to_slice();
    let mut pairs = acts
        .to_slice_mut()
        .into_vectorized()
        .with_vector_size::<Const<2>>();
    let (row, col) = position(l);
    // The lane's row and column offsets in its ldmatrix pointers.
    let a_row = l % 16usize;
    let a_col = (l / 16usize) * 8usize;
    // Sums over the inputs too: the first layer's δ is not stored.
    let with_x = comptime!(first && sums.is_some_and(|c| c.first));
    let inputs = comptime!(sums.map_or(1, |c| c.inputs));
    let values = comptime!(sums.map_or(1, |c| c.values()));
    let mut b = plane;
    let mut j = 0usize;
    while b < work {
        let (m0, n_first) = origin(b, sp);
        let mut accs = zeros::<F>(comptime!(rg * g));
        for k in 0..nb {
            let k0 = k * BLOCK;
            let mut a = Sequence::<Pairs<E>>::new();
            #[unroll]
            for i in 0..rg {
                let at_a = at.src + (m0 + i * BLOCK + a_row) * sh + k0 + a_col;
                a.push(load4::<F, E>(&source, at_a, MatrixIdent::A, false));
            }
            #[unroll]
            for q in 0..g {
                let n0 = n_first + q * BLOCK;
                let r = weight_operand::<F, E>(w, k0, n0, ws, layer.below);
                #[unroll]
                for i in 0..rg {
                    block_mma::<F, E>(a.index(i), &r, &mut accs, comptime!(i * g + q));
                }
            }
        }
        // The lane's first pair in the item, as a pair index: rows, column
        // offsets and the row sets' starts are even. Every other pair is a
        // constant away, so each access adds one (CubeCL's indices are
        // unsigned: the compiler does not fold the constant into the load).
        let lane_pair = ((m0 + row) * sh + n_first + col) / 2usize;
        let d0 = at.dst / 2usize + lane_pair;
        let a0 = below_a / 2usize + lane_pair;
        // The item's column sums (`values` a lane), and the inputs of its rows.
        let mut cs = rows::zeroed::<F>(values);
        let mut fs = Sequence::<Array<F>>::new();
        let mut xs = Array::<F>::new(comptime!(2 * rg * inputs));
        if comptime!(with_x) {
            #[unroll]
            for _ in 0..inputs {
                fs.push(rows::zeroed::<F>(values));
            }
            #[unroll]
            for r in 0..comptime!(2 * rg) {
                let t = m0 + row + comptime!((r / 2) * BLOCK + (r % 2) * 8);
                #[unroll]
                for a in 0..inputs {
                    xs[comptime!(r * inputs + a)] = xin[t * inputs + a];
                }
            }
        }
        #[unroll]
        for i in 0..rg {
            #[unroll]
            for q in 0..comptime!(2usize * g) {
                let acc = accs.index(i * 2usize * g + q);
                let mut bias = Vector::<F, Const<2>>::empty();
                if comptime!(!layer.below) {
                    let at_b = at.off + comptime!(hidden * hidden) + n_first + q * TILE_N + col;
                    bias[0] = params[at_b];
                    bias[1] = params[at_b + 1usize];
                }
                #[unroll]
                for h in 0..2usize {
                    let v = acc[h];
                    let off = comptime!(((i * BLOCK + h * 8) * sh + q * TILE_N) / 2);
                    let mut out = Vector::<E, Const<2>>::empty();
                    if comptime!(!layer.below) {
                        out[0] = E::cast_from(act_fwd::<F>(v[0] + bias[0], act));
                        out[1] = E::cast_from(act_fwd::<F>(v[1] + bias[1], act));
                    } else {
                        let a = pairs[a0 + off];
                        let d_lo = v[0] * act_bwd_at::<F>(F::cast_from(a[0]), act);
                        let d_hi = v[1] * act_bwd_at::<F>(F::cast_from(a[1]), act);
                        out[0] = E::cast_from(d_lo);
                        out[1] = E::cast_from(d_hi);
                        if comptime!(sums.is_some()) {
                            cs[comptime!(2 * q)] += d_lo;
                            cs[comptime!(2 * q + 1)] += d_hi;
                        }
                        if comptime!(with_x) {
                            #[unroll]
                            for a in 0..inputs {
                                let x = xs[comptime!((2 * i + h) * inputs + a)];
                                let f = fs.index_mut(a);
                                f[comptime!(2 * q)] += d_lo * x;
                                f[comptime!(2 * q + 1)] += d_hi * x;
                            }
                        }
                    }
                    if comptime!(!with_x) {
                        pairs[d0 + off] = out;
                    }
                }
            }
        }
        if comptime!(sums.is_some()) {
            let c = comptime!(sums.unwrap());
            colsums::keep::<F>(kept, &mut cs, which, j, c);
            if comptime!(with_x) {
                #[unroll]
                for a in 0..inputs {
                    let set = comptime!(c.layers - 1 + a);
                    colsums::keep::<F>(kept, fs.index_mut(a), set, j, c);
                }
            }
        }
        j += 1usize;
        b += planes;
    }
}

/// The split of a hidden layer's weight gradient (`hidden` wide) over
/// `planes` planes.
pub fn grad_split(hidden: usize, planes: usize) -> Split {
    split_blocks(hidden / BLOCK, hidden / BLOCK, planes)
}

/// Adds δᵀ·a of the tile into the `rows·group` blocks of `accs` from block
/// `from` (two m16n8 accumulators a block, as [`zeros`] makes them) for the
/// item of `sp` that starts at rows `m0`, columns `n_first`: δ rows at
/// `at.dst`, the activations below at `at.src`.
#[cube]
#[allow(clippy::too_many_arguments)]
pub fn grad_item<F: Float, E: Float>(
    source: &Slice<E>,
    accs: &mut Sequence<Pairs<F>>,
    at: &At,
    m0: usize,
    n_first: usize,
    #[comptime] from: usize,
    #[comptime] sp: Split,
    #[comptime] layer: Layer,
) {
    let sh = comptime!(row_stride(layer.out_w));
    let (rg, g) = comptime!((sp.rows, sp.group));
    let l = (UNIT_POS % PLANE_UNITS) as usize;
    for t in 0..comptime!(layer.tile / BLOCK) {
        let t0 = t * BLOCK;
        let mut d = Sequence::<Pairs<E>>::new();
        #[unroll]
        for i in 0..rg {
            // A[m, k] = δ[k, m]: the δ rows (k) hold m, transposed.
            let at_d = at.dst
                + (t0 + l % 8usize + (l / 16usize) * 8usize) * sh
                + m0
                + i * BLOCK
                + ((l / 8usize) % 2usize) * 8usize;
            d.push(load4::<F, E>(source, at_d, MatrixIdent::A, true));
        }
        #[unroll]
        for q in 0..g {
            let n0 = n_first + q * BLOCK;
            // B[k, n] = a[k, n]: rows of k hold n, transposed.
            let at_x = at.src
                + (t0 + l % 8usize + ((l / 8usize) % 2usize) * 8usize) * sh
                + n0
                + (l / 16usize) * 8usize;
            let r = load4::<F, E>(source, at_x, MatrixIdent::B, true);
            #[unroll]
            for i in 0..rg {
                let blk = comptime!(from + i * g + q);
                block_mma::<F, E>(d.index(i), &r, accs, blk);
            }
        }
    }
}

/// [`crate::engine::fused::gpu::kernels::mma::weight_grads`] on registers,
/// each block finished through the plane's 16×16 scratch like it.
#[cube]
pub fn weight_grads<F: Float, E: Float>(
    acts: &SharedMemory<E>,
    scr: &mut SharedMemory<F>,
    partials: &mut Array<F>,
    at: &At,
    first: bool,
    #[comptime] layer: Layer,
    #[comptime] planes: usize,
) {
    let hidden = comptime!(layer.out_w);
    let sp = comptime!(grad_split(hidden, planes));
    let (rg, g, work) = comptime!((sp.rows, sp.group, sp.items));
    let plane = (UNIT_POS / PLANE_UNITS) as usize;
    let l = (UNIT_POS % PLANE_UNITS) as usize;
    let mine = plane * comptime!(BLOCK * BLOCK);
    let source = acts.to_slice();
    let (row, col) = position(l);
    let mut b = plane;
    while b < work {
        let (m0, n_first) = origin(b, sp);
        let mut accs = zeros::<F>(comptime!(rg * g));
        grad_item::<F, E>(&source, &mut accs, at, m0, n_first, 0usize, sp, layer);
        // Through the plane's scratch, so that the partial row is read and
        // written along its rows (straight from the registers, each access
        // would touch eight rows).
        #[unroll]
        for i in 0..rg {
            #[unroll]
            for q in 0..g {
                let mut block = scr
                    .to_slice_mut()
                    .into_vectorized()
                    .with_vector_size::<Const<2>>();
                #[unroll]
                for h in 0..2usize {
                    let acc = accs.index(2usize * (i * g + q) + h);
                    #[unroll]
                    for r in 0..2usize {
                        block[(mine + (row + r * 8usize) * BLOCK + h * TILE_N + col) / 2usize] =
                            acc[r];
                    }
                }
                sync_plane();
                let at_g = at.off + (m0 + i * BLOCK) * hidden + n_first + q * BLOCK;
                scratch_to_partials::<F>(scr, partials, mine, at_g, first, hidden);
                sync_plane();
            }
        }
        b += planes;
    }
}
