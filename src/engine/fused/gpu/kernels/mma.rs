//! The tensor-core products of [`crate::engine::fused::gpu::kernels::tensor`]:
//! a hidden-to-hidden layer over a tile of activations in shared memory,
//! forward (`act(A·Wᵀ + b)`), backward (`(δ·W) ⊙ act'(a)`, in place) and its
//! weight gradient (`δᵀ·A`), as 16×16×16 CubeCL `cmma` products with half
//! operands and f32 accumulators, one plane (warp) per output block. Each
//! plane finishes its block through its own 16×16 f32 scratch.

use crate::engine::fused::gpu::kernels::layers::{At, Layer};
use crate::engine::fused::gpu::kernels::math::{act_bwd_at, act_fwd};
use crate::engine::fused::gpu::kernels::tensor::{add_to, row_stride, BLOCK, PLANES, PLANE_UNITS};
use cubecl::cmma::{self, Matrix, MatrixIdent, MatrixLayout};
use cubecl::prelude::*;

/// A hidden-to-hidden layer's product over the tile on the tensor cores,
/// one plane per 16×16 output block. Forward (`!layer.below`): the rows at
/// `at.dst` become act(A·Wᵀ + b) of the rows at `at.src`. Backward: the δ
/// rows at `at.src` times W, times act' of the activations at `at.dst`,
/// written over them (the layer below's δ). W (and b) start at `at.off`.
#[cube]
pub fn product<F: Float, E: Float>(
    acts: &mut SharedMemory<E>,
    scr: &mut SharedMemory<F>,
    half: &Array<E>,
    params: &Array<F>,
    at: &At,
    #[comptime] layer: Layer,
) {
    let hidden = comptime!(layer.out_w);
    let act = comptime!(layer.act);
    let sh = comptime!(row_stride(hidden));
    let nb = comptime!(hidden / BLOCK);
    let blocks = comptime!((layer.tile / BLOCK) * (hidden / BLOCK));
    let span_a = comptime!((BLOCK - 1) * sh + BLOCK);
    let span_w = comptime!((BLOCK - 1) * hidden + BLOCK);
    let plane = (UNIT_POS / PLANE_UNITS) as usize;
    let lane = (UNIT_POS % PLANE_UNITS) as usize;
    let mine = plane * comptime!(BLOCK * BLOCK);
    let mut b = plane;
    while b < blocks {
        let m0 = (b / nb) * BLOCK;
        let n0 = (b % nb) * BLOCK;
        let acc = Matrix::<F>::from_value(
            MatrixIdent::Accumulator,
            BLOCK,
            BLOCK,
            BLOCK,
            MatrixLayout::Undefined,
            F::new(0.0),
        );
        for k in 0..nb {
            let k0 = k * BLOCK;
            let a_at = at.src + m0 * sh + k0;
            let a = Matrix::<E>::from_slice(
                MatrixIdent::A,
                BLOCK,
                BLOCK,
                BLOCK,
                MatrixLayout::RowMajor,
                &acts.slice(a_at, a_at + span_a),
                comptime!(sh as u32),
            );
            if comptime!(!layer.below) {
                // B[k, n] = W[n, k]: W read column-major.
                let w_at = at.off + n0 * hidden + k0;
                let w = Matrix::<E>::from_slice(
                    MatrixIdent::B,
                    BLOCK,
                    BLOCK,
                    BLOCK,
                    MatrixLayout::ColMajor,
                    &half.slice(w_at, w_at + span_w),
                    comptime!(hidden as u32),
                );
                cmma::execute::<E, E, F, F>(&a, &w, &acc, &acc);
            } else {
                // B[k, n] = W[k, n].
                let w_at = at.off + k0 * hidden + n0;
                let w = Matrix::<E>::from_slice(
                    MatrixIdent::B,
                    BLOCK,
                    BLOCK,
                    BLOCK,
                    MatrixLayout::RowMajor,
                    &half.slice(w_at, w_at + span_w),
                    comptime!(hidden as u32),
                );
                cmma::execute::<E, E, F, F>(&a, &w, &acc, &acc);
            }
        }
        cmma::store(
            &mut scr.slice_mut(mine, mine + comptime!(BLOCK * BLOCK)),
            &acc,
            comptime!(BLOCK as u32),
            MatrixLayout::RowMajor,
        );
        sync_plane();
        // A lane's values share one column: e % 16 = lane % 16.
        let col = n0 + lane % BLOCK;
        let mut bias = F::new(0.0);
        if comptime!(!layer.below) {
            bias = params[at.off + comptime!(hidden * hidden) + col];
        }
        #[unroll]
        for i in 0..comptime!(BLOCK * BLOCK / PLANE_UNITS as usize) {
            let e = lane + i * comptime!(PLANE_UNITS as usize);
            let d = at.dst + (m0 + e / BLOCK) * sh + col;
            let v = scr[mine + e];
            if comptime!(!layer.below) {
                let z = v + bias;
                acts[d] = E::cast_from(act_fwd::<F>(z, act));
            } else {
                let a = F::cast_from(acts[d]);
                acts[d] = E::cast_from(v * act_bwd_at::<F>(a, act));
            }
        }
        sync_plane();
        b += PLANES;
    }
}

/// A hidden-to-hidden layer's weight gradient `δᵀ·A` over the tile on the
/// tensor cores, one plane per 16×16 block of W, in f32: through the plane's
/// scratch into `partials` from `at.off` (written on the cube's `first`
/// tile, added to after; a partial row need not be aligned as the tensor
/// cores' loads want): δ rows at `at.dst`, the activations below at `at.src`.
#[cube]
pub fn weight_grads<F: Float, E: Float>(
    acts: &SharedMemory<E>,
    scr: &mut SharedMemory<F>,
    partials: &mut Array<F>,
    at: &At,
    first: bool,
    #[comptime] layer: Layer,
) {
    let hidden = comptime!(layer.out_w);
    let sh = comptime!(row_stride(hidden));
    let nb = comptime!(hidden / BLOCK);
    let span_a = comptime!((BLOCK - 1) * sh + BLOCK);
    let plane = (UNIT_POS / PLANE_UNITS) as usize;
    let lane = (UNIT_POS % PLANE_UNITS) as usize;
    let mine = plane * comptime!(BLOCK * BLOCK);
    let mut b = plane;
    while b < comptime!(nb * nb) {
        let m0 = (b / nb) * BLOCK;
        let n0 = (b % nb) * BLOCK;
        let g_at = at.off + m0 * hidden + n0;
        let acc = Matrix::<F>::from_value(
            MatrixIdent::Accumulator,
            BLOCK,
            BLOCK,
            BLOCK,
            MatrixLayout::Undefined,
            F::new(0.0),
        );
        for t in 0..comptime!(layer.tile / BLOCK) {
            let t0 = t * BLOCK;
            // A[m, k] = δ[k, m]: the δ rows read column-major.
            let d_at = at.dst + t0 * sh + m0;
            let d = Matrix::<E>::from_slice(
                MatrixIdent::A,
                BLOCK,
                BLOCK,
                BLOCK,
                MatrixLayout::ColMajor,
                &acts.slice(d_at, d_at + span_a),
                comptime!(sh as u32),
            );
            let x_at = at.src + t0 * sh + n0;
            let x = Matrix::<E>::from_slice(
                MatrixIdent::B,
                BLOCK,
                BLOCK,
                BLOCK,
                MatrixLayout::RowMajor,
                &acts.slice(x_at, x_at + span_a),
                comptime!(sh as u32),
            );
            cmma::execute::<E, E, F, F>(&d, &x, &acc, &acc);
        }
        cmma::store(
            &mut scr.slice_mut(mine, mine + comptime!(BLOCK * BLOCK)),
            &acc,
            comptime!(BLOCK as u32),
            MatrixLayout::RowMajor,
        );
        sync_plane();
        #[unroll]
        for i in 0..comptime!(BLOCK * BLOCK / PLANE_UNITS as usize) {
            let e = lane + i * comptime!(PLANE_UNITS as usize);
            add_to(
                partials,
                g_at + (e / BLOCK) * hidden + e % BLOCK,
                scr[mine + e],
                first,
            );
        }
        sync_plane();
        b += PLANES;
    }
}
