//! The shared-output tensor-core pass ([`crate::engine::fused::gpu::kernels::tensor`])
//! going down one hidden layer: the weight gradient `δᵀ·A` — added into the
//! cube's partial row each tile, or held in registers over the launch
//! ([`crate::engine::fused::gpu::kernels::held`]) —, the bias sums, and
//! `δ_below = (δ·W) ⊙ act'(a)` into a row set nobody reads any more, so all
//! take one stretch between barriers (the bias sums below the top layer in
//! the product's epilogue where the plan says so,
//! [`crate::engine::fused::gpu::kernels::colsums`]); and where the products
//! read a layer's weights from.

use crate::engine::fused::gpu::kernels::colsums::Cols;
use crate::engine::fused::gpu::kernels::held;
use crate::engine::fused::gpu::kernels::layers::{At, Layer};
use crate::engine::fused::gpu::kernels::mma::{product, row_stride, weight_grads, PLANE_UNITS};
use crate::engine::fused::gpu::kernels::mma_regs;
use crate::engine::fused::gpu::kernels::sums::{add_share, Kind, Sum};
use crate::engine::fused::gpu::shape::{Pass, Shape};
use cubecl::prelude::*;

/// The row set of (0-based) hidden layer `l`'s δ out of `layers`: the top
/// layer's over its own activations (the output layer writes it there), each
/// one below in the set of layer `l + 2` — the extra set for `layers − 2`,
/// and for the others a set whose δ or activations have been read by then.
#[cube]
pub fn delta_rows(l: usize, #[comptime] layers: usize) -> usize {
    if l + 1 == layers {
        l
    } else {
        l + 2
    }
}

/// One hidden layer `l` going down: its weight gradient from δ (in row set
/// `delta_rows(l)`) and the activations below — into `kept` from block
/// `hold` where given, else into the cube's partial `row` (written on the
/// `first` tile) —, its bias sums, and the δ of the layer below into a free
/// row set.
#[cube]
#[allow(clippy::too_many_arguments)]
pub fn backward_layer<F: Float, E: Float>(
    acts: &mut SharedMemory<E>,
    scr: &mut SharedMemory<F>,
    kept: &mut Sequence<mma_regs::Pairs<F>>,
    partials: &mut Array<F>,
    wsm: &SharedMemory<E>,
    half: &Array<E>,
    params: &Array<F>,
    acc_bias: &mut Array<F>,
    down_sums: &mut Array<F>,
    xin: &SharedMemory<F>,
    row: usize,
    l: usize,
    first: bool,
    #[comptime] hold: Option<usize>,
    #[comptime] shape: Shape,
    #[comptime] pass: Pass,
) {
    let (inputs, hidden, layers) = comptime!((shape.inputs, shape.hidden, shape.layers));
    let plan = comptime!(pass.tensor.expect("a tensor-core pass has a plan"));
    let (streamed, regs, tile) = comptime!((plan.streamed, plan.regs, pass.tile));
    let planes = comptime!(plan.units / PLANE_UNITS as usize);
    let spirv = comptime!(pass.spirv);
    let plane_rows = comptime!(tile * row_stride(hidden));
    let hh = comptime!(hidden * hidden + hidden);
    let off1 = comptime!(hidden * inputs + hidden);
    let ws = comptime!(if streamed { hidden } else { row_stride(hidden) });
    let w_rows = comptime!(hidden * row_stride(hidden));
    let backward = comptime!(Layer::new(tile, hidden, hidden, shape.act, true));
    let s_bias = comptime!(Sum::of(Kind::Bias, &shape, &pass, plan.units));
    let off = off1 + (l - 1) * hh;
    let d_here = delta_rows(l, layers) * plane_rows;
    let a_below = (l - 1) * plane_rows;
    // The gradient entries at `off` of the row, from δ (`dst`) and the a below (`src`).
    let grads = At {
        off: row + off,
        src: a_below,
        dst: d_here,
    };
    if comptime!(hold.is_some()) {
        let from = comptime!(hold.unwrap());
        held::add_tile::<F, E>(acts, kept, &grads, from, backward, planes);
    } else if comptime!(regs) {
        mma_regs::weight_grads::<F, E>(acts, scr, partials, &grads, first, backward, planes);
    } else {
        weight_grads::<F, E>(acts, scr, partials, &grads, first, backward, planes, spirv);
    }
    // The bias sums from the δ rows: only the top layer's where the down
    // products make the others (`colsums`).
    let cols = comptime!(Cols::of(&shape, &pass));
    if comptime!(cols.is_some()) {
        if l + 1 == layers {
            add_share::<F, E>(acc_bias, l, acts, xin, d_here, s_bias);
        }
    } else {
        add_share::<F, E>(acc_bias, l, acts, xin, d_here, s_bias);
    }
    // δ (`src`) times the weights, times act' of the a below, into a free set.
    let down = At {
        off,
        src: d_here,
        dst: delta_rows(l - 1, layers) * plane_rows,
    };
    let w = hidden_weights::<E>(wsm, half, l, off1, hh, streamed, w_rows);
    if comptime!(regs && cols.is_some()) {
        // The first hidden layer's δ: its weight sums too (a second copy
        // of the product, where `l` is not known when compiled).
        if l == 1 {
            mma_regs::product::<F, E>(
                acts,
                &w,
                params,
                &down,
                a_below,
                down_sums,
                xin,
                l - 1,
                backward,
                ws,
                planes,
                cols,
                true,
            );
        } else {
            mma_regs::product::<F, E>(
                acts,
                &w,
                params,
                &down,
                a_below,
                down_sums,
                xin,
                l - 1,
                backward,
                ws,
                planes,
                cols,
                false,
            );
        }
    } else if comptime!(regs) {
        mma_regs::product::<F, E>(
            acts, &w, params, &down, a_below, down_sums, xin, 0usize, backward, ws, planes, None,
            false,
        );
    } else {
        product::<F, E>(
            acts, scr, &w, params, &down, a_below, backward, ws, planes, spirv,
        );
    }
    sync_cube();
}

/// Hidden layer `l`'s weights (H rows of H) as the products read them: from
/// `wsm` (rows of `w_rows / H`), or with `streamed` from the operand-type
/// copy of the parameters (rows of H, from `off1 + (l - 1)·hh`).
#[cube]
#[allow(clippy::too_many_arguments)]
pub fn hidden_weights<E: Float>(
    wsm: &SharedMemory<E>,
    half: &Array<E>,
    l: usize,
    #[comptime] off1: usize,
    #[comptime] hh: usize,
    #[comptime] streamed: bool,
    #[comptime] w_rows: usize,
) -> Slice<E> {
    if comptime!(streamed) {
        let at = off1 + (l - 1) * hh;
        half.slice(at, at + comptime!(hh))
    } else {
        wsm.slice((l - 1) * w_rows, l * w_rows)
    }
}
