//! The tensor-core products of [`crate::engine::fused::gpu::kernels::tensor`]:
//! a hidden-to-hidden layer over a tile of activations in shared memory,
//! forward (`act(A·Wᵀ + b)`), backward (`(δ·W) ⊙ act'(a)`, in place) and its
//! weight gradient (`δᵀ·A`), as 16×16×16 CubeCL `cmma` products with half
//! operands and f32 accumulators, shared out over the cube's `planes`
//! planes (warps). A plane takes a row of [`group`]
//! neighbouring 16×16 output blocks at once: each A fragment it loads serves
//! that many products, and the independent accumulators keep the tensor
//! cores busy while loads are in flight. Each plane finishes its blocks
//! through its own 16×16 f32 scratch, its lanes reading what the fragment
//! store wrote after a plane barrier — or, where a plane barrier orders no
//! shared memory (CubeCL's SPIR-V: a subgroup control barrier without
//! memory semantics), after the cube's barrier, every plane taking the same
//! number of rounds ([`handoff`]).

use crate::engine::fused::gpu::kernels::layers::{At, Layer};
use crate::engine::fused::gpu::kernels::math::{act_bwd_at, act_fwd};
use crate::engine::fused::gpu::kernels::round::to_operand;
use cubecl::cmma::{self, Matrix, MatrixIdent, MatrixLayout};
use cubecl::prelude::*;

/// Rows and columns of one tensor-core block.
pub const BLOCK: usize = 16;
/// Units per plane the kernel is written for.
pub const PLANE_UNITS: u32 = 32;

/// Row stride of the activation rows: the width plus 8 (16 bytes), against
/// bank conflicts, still a multiple of 8 as the tensor-core loads want.
pub fn row_stride(hidden: usize) -> usize {
    hidden + 8
}

/// Output blocks a plane computes together along a row of `blocks` blocks,
/// when the product has `row_blocks` rows of blocks: the largest of 4, 2, 1
/// that divides the row and still leaves every one of the cube's `planes`
/// planes an item (more blocks a group reuse each loaded fragment more; idle
/// planes cost more than that), else 1.
pub fn group(blocks: usize, row_blocks: usize, planes: usize) -> usize {
    [4, 2, 1]
        .into_iter()
        .find(|g| blocks.is_multiple_of(*g) && row_blocks * (blocks / g) >= planes)
        .unwrap_or(1)
}

/// How a product's output of 16×16 blocks is shared out over a cube's
/// planes: items of `rows` × `group` neighbouring blocks, `per_row` items
/// a row of items, `items` in all (item `b` goes to plane `b % planes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Split {
    /// Rows of blocks an item.
    pub rows: usize,
    /// Blocks along a row an item.
    pub group: usize,
    /// Items a row of blocks.
    pub per_row: usize,
    /// Items in all.
    pub items: usize,
}

/// The split of `row_blocks` rows of `blocks` blocks over `planes` planes.
pub fn split(blocks: usize, row_blocks: usize, planes: usize) -> Split {
    let g = group(blocks, row_blocks, planes);
    Split {
        rows: 1,
        group: g,
        per_row: blocks / g,
        items: row_blocks * (blocks / g),
    }
}

/// The split of `row_blocks` rows of `blocks` blocks over `planes` planes
/// into items of up to 2 × 4 blocks (products on registers): the shape that
/// loads the fewest operand bytes a product — `rows` A fragments and `group`
/// B fragments serve `rows × group` blocks — while every plane has an item,
/// else [`split`]'s single row.
pub fn split_blocks(blocks: usize, row_blocks: usize, planes: usize) -> Split {
    let fits = |(r, g): &(usize, usize)| {
        blocks.is_multiple_of(*g)
            && row_blocks.is_multiple_of(*r)
            && (row_blocks / r) * (blocks / g) >= planes
    };
    // Operand loads a block, (r + g) / (r·g), compared without division;
    // of two alike, the wider.
    let best = [(2, 4), (2, 2), (1, 4), (1, 2)]
        .into_iter()
        .filter(fits)
        .min_by_key(|&(r, g)| ((r + g) * 8 / (r * g), usize::MAX - g));
    match best {
        Some((r, g)) if r > 1 => Split {
            rows: r,
            group: g,
            per_row: blocks / g,
            items: (row_blocks / r) * (blocks / g),
        },
        _ => split(blocks, row_blocks, planes),
    }
}

/// The first row and column of item `b` of `sp`.
#[cube]
pub fn origin(b: usize, #[comptime] sp: Split) -> (usize, usize) {
    let m0 = (b / comptime!(sp.per_row)) * comptime!(sp.rows * BLOCK);
    let n_first = (b % comptime!(sp.per_row)) * comptime!(sp.group * BLOCK);
    (m0, n_first)
}

/// `count` zeroed 16×16 f32 accumulators.
#[cube]
fn accumulators<F: Float>(#[comptime] count: usize) -> Sequence<Matrix<F>> {
    let mut accs = Sequence::new();
    #[unroll]
    for _ in 0..count {
        accs.push(Matrix::<F>::from_value(
            MatrixIdent::Accumulator,
            BLOCK,
            BLOCK,
            BLOCK,
            MatrixLayout::Undefined,
            F::new(0.0),
        ));
    }
    accs
}

/// A 16×16 operand fragment of `ident` from `from` (a slice of rows of
/// `stride` values) at `at`, read row- or column-major.
#[cube]
fn operand<E: Float>(
    from: &Slice<E>,
    at: usize,
    #[comptime] ident: MatrixIdent,
    #[comptime] layout: MatrixLayout,
    #[comptime] stride: usize,
) -> Matrix<E> {
    Matrix::<E>::from_slice(
        ident,
        BLOCK,
        BLOCK,
        BLOCK,
        layout,
        &from.slice(at, at + comptime!((BLOCK - 1) * stride + BLOCK)),
        comptime!(stride as u32),
    )
}

/// `acc` into the plane's 16×16 scratch from `mine`, row-major (visible to
/// the plane's lanes after a [`handoff`]).
#[cube]
fn to_scratch<F: Float>(scr: &mut SharedMemory<F>, acc: &Matrix<F>, mine: usize) {
    cmma::store(
        &mut scr.slice_mut(mine, mine + comptime!(BLOCK * BLOCK)),
        acc,
        comptime!(BLOCK as u32),
        MatrixLayout::RowMajor,
    );
}

/// The barrier between a plane's writes to its scratch and its lanes'
/// reads (and back): the plane's own, or with `cube` the cube's — where the
/// plane barrier orders no shared memory; every unit of the cube must then
/// reach it, so the planes run the same number of rounds.
#[cube]
pub fn handoff(#[comptime] cube: bool) {
    if comptime!(cube) {
        sync_cube();
    } else {
        sync_plane();
    }
}

/// A hidden-to-hidden layer's product over the tile on the tensor cores.
/// Forward (`!layer.below`): the rows at `at.dst` become act(A·Wᵀ + b) of
/// the rows at `at.src` (`below_a` unused). Backward: the δ rows at `at.src`
/// times W, times act' of the activations at `below_a`, into the rows at
/// `at.dst` (the layer below's δ; `at.dst` may be `below_a`).
/// W is `w` (rows of `ws` values: [`row_stride`] in shared memory, the
/// width in global memory), b starts at `at.off + H·H`.
#[cube]
#[allow(clippy::too_many_arguments)]
pub fn product<F: Float, E: Float>(
    acts: &mut SharedMemory<E>,
    scr: &mut SharedMemory<F>,
    w: &Slice<E>,
    params: &Array<F>,
    at: &At,
    below_a: usize,
    #[comptime] layer: Layer,
    #[comptime] ws: usize,
    #[comptime] planes: usize,
    #[comptime] spirv: bool,
) {
    let hidden = comptime!(layer.out_w);
    let act = comptime!(layer.act);
    let sh = comptime!(row_stride(hidden));
    let nb = comptime!(hidden / BLOCK);
    let sp = comptime!(split(nb, layer.tile / BLOCK, planes));
    let (g, work) = comptime!((sp.group, sp.items));
    let plane = (UNIT_POS / PLANE_UNITS) as usize;
    let lane = (UNIT_POS % PLANE_UNITS) as usize;
    let mine = plane * comptime!(BLOCK * BLOCK);
    let source = acts.to_slice();
    // Item `b` of every round goes to plane `b % planes`; a plane past the
    // last item still meets the others at the barriers.
    for round in 0..comptime!(work.div_ceil(planes)) {
        let b = plane + round * planes;
        let live = b < work;
        let (m0, n_first) = origin(b, sp);
        let accs = accumulators::<F>(g);
        if live {
            for k in 0..nb {
                let k0 = k * BLOCK;
                let a = operand::<E>(
                    &source,
                    at.src + m0 * sh + k0,
                    MatrixIdent::A,
                    MatrixLayout::RowMajor,
                    sh,
                );
                #[unroll]
                for q in 0..g {
                    let n0 = n_first + q * BLOCK;
                    // Forward: B[k, n] = W[n, k] (W read column-major); backward: W[k, n].
                    let wm = if comptime!(!layer.below) {
                        operand::<E>(w, n0 * ws + k0, MatrixIdent::B, MatrixLayout::ColMajor, ws)
                    } else {
                        operand::<E>(w, k0 * ws + n0, MatrixIdent::B, MatrixLayout::RowMajor, ws)
                    };
                    cmma::execute::<E, E, F, F>(&a, &wm, accs.index(q), accs.index(q));
                }
            }
        }
        #[unroll]
        for q in 0..g {
            let n0 = n_first + q * BLOCK;
            if live {
                to_scratch::<F>(scr, accs.index(q), mine);
            }
            handoff(spirv);
            if live {
                // A lane's values share one column: e % 16 = lane % 16.
                let col = n0 + lane % BLOCK;
                let mut bias = F::new(0.0);
                if comptime!(!layer.below) {
                    bias = params[at.off + comptime!(hidden * hidden) + col];
                }
                #[unroll]
                for i in 0..comptime!(BLOCK * BLOCK / PLANE_UNITS as usize) {
                    let e = lane + i * comptime!(PLANE_UNITS as usize);
                    let at_e = (m0 + e / BLOCK) * sh + col;
                    let v = scr[mine + e];
                    if comptime!(!layer.below) {
                        acts[at.dst + at_e] =
                            to_operand::<F, E>(act_fwd::<F>(v + bias, act), spirv);
                    } else {
                        let a = F::cast_from(acts[below_a + at_e]);
                        acts[at.dst + at_e] =
                            to_operand::<F, E>(v * act_bwd_at::<F>(a, act), spirv);
                    }
                }
            }
            handoff(spirv);
        }
    }
}

/// A hidden-to-hidden layer's weight gradient `δᵀ·A` over the tile on the
/// tensor cores, in f32: through the plane's scratch into `partials` from
/// `at.off` (written on the cube's `first` tile, added to after; a partial
/// row need not be aligned as the tensor cores' loads want): δ rows at
/// `at.dst`, the activations below at `at.src`.
#[cube]
pub fn weight_grads<F: Float, E: Float>(
    acts: &SharedMemory<E>,
    scr: &mut SharedMemory<F>,
    partials: &mut Array<F>,
    at: &At,
    first: bool,
    #[comptime] layer: Layer,
    #[comptime] planes: usize,
    #[comptime] spirv: bool,
) {
    let hidden = comptime!(layer.out_w);
    let sh = comptime!(row_stride(hidden));
    let nb = comptime!(hidden / BLOCK);
    let sp = comptime!(split(nb, nb, planes));
    let (g, work) = comptime!((sp.group, sp.items));
    let plane = (UNIT_POS / PLANE_UNITS) as usize;
    let mine = plane * comptime!(BLOCK * BLOCK);
    let source = acts.to_slice();
    for round in 0..comptime!(work.div_ceil(planes)) {
        let b = plane + round * planes;
        let live = b < work;
        let (m0, n_first) = origin(b, sp);
        let accs = accumulators::<F>(g);
        if live {
            for t in 0..comptime!(layer.tile / BLOCK) {
                let t0 = t * BLOCK;
                // A[m, k] = δ[k, m]: the δ rows read column-major.
                let d = operand::<E>(
                    &source,
                    at.dst + t0 * sh + m0,
                    MatrixIdent::A,
                    MatrixLayout::ColMajor,
                    sh,
                );
                #[unroll]
                for q in 0..g {
                    let x_at = at.src + t0 * sh + n_first + q * BLOCK;
                    let x = operand::<E>(&source, x_at, MatrixIdent::B, MatrixLayout::RowMajor, sh);
                    cmma::execute::<E, E, F, F>(&d, &x, accs.index(q), accs.index(q));
                }
            }
        }
        #[unroll]
        for q in 0..g {
            if live {
                to_scratch::<F>(scr, accs.index(q), mine);
            }
            handoff(spirv);
            if live {
                let at_g = at.off + m0 * hidden + n_first + q * BLOCK;
                scratch_to_partials::<F>(scr, partials, mine, at_g, first, hidden);
            }
            handoff(spirv);
        }
    }
}

/// The 16×16 f32 block in the plane's scratch at `mine` added into
/// `partials` from `at` (rows of `hidden`; written where `first`), lane by
/// lane along the block's rows (coalesced). Every value a lane adds to is
/// read before any is written (read one by one, each read waited for the
/// store before it: 32 round trips to memory for 4 blocks). A [`handoff`]
/// must follow before the scratch is written again.
#[cube]
pub fn scratch_to_partials<F: Float>(
    scr: &SharedMemory<F>,
    partials: &mut Array<F>,
    mine: usize,
    at: usize,
    first: bool,
    #[comptime] hidden: usize,
) {
    let lane = (UNIT_POS % PLANE_UNITS) as usize;
    let per_lane = comptime!(BLOCK * BLOCK / PLANE_UNITS as usize);
    let mut vals = Array::<F>::new(per_lane);
    #[unroll]
    for i in 0..per_lane {
        vals[i] = scr[mine + lane + i * comptime!(PLANE_UNITS as usize)];
    }
    if !first {
        #[unroll]
        for i in 0..per_lane {
            let e = lane + i * comptime!(PLANE_UNITS as usize);
            vals[i] += partials[at + (e / BLOCK) * hidden + e % BLOCK];
        }
    }
    #[unroll]
    for i in 0..per_lane {
        let e = lane + i * comptime!(PLANE_UNITS as usize);
        partials[at + (e / BLOCK) * hidden + e % BLOCK] = vals[i];
    }
}
