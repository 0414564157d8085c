//! The fused GPU pass on tensor cores (CubeCL `cmma`): deep models in half
//! precision, f32 accumulation, f32 master weights.
//!
//! Like [`crate::engine::fused::gpu::kernels::tiled`], a cube takes a tile of
//! `tile` points at a time and writes one partial gradient row (the same
//! layout, summed by the same `reduce_update`). The hidden-to-hidden layers —
//! where a deep model's arithmetic is — are 16×16×16 matrix products on the
//! tensor cores ([`crate::engine::fused::gpu::kernels::mma`]), their weights
//! in shared memory for the whole launch or read from global memory as the
//! products need them (the plan's `streamed`; [`crate::engine::fused::gpu::tensor_plan`]):
//!
//! - forward: `Z = A·Wᵀ` for the tile, then bias and activation in f32,
//!   stored back as half values;
//! - backward: the weight gradient `δᵀ·A` in f32, added into the cube's
//!   partial row once per tile, and `δ_below = (δ·W) ⊙ act'(a)` into a row
//!   set nobody reads any more, so both take one stretch between barriers.
//!
//! Every hidden layer's activations stay in shared memory, in the operand
//! type `E` (f16 or bf16); the first layer (few inputs) and the output layer
//! (few outputs; [`crate::engine::fused::gpu::kernels::head`]) are plain f32
//! arithmetic, and the other sums over the tile that are not matrix products
//! are shared by every unit ([`crate::engine::fused::gpu::kernels::sums`]). The output δ is *not*
//! multiplied by the batch's scale (1/N would underflow f16): the row is
//! scaled once at the end, so f16 needs no loss scaling for losses of
//! ordinary size. Activations whose derivative needs z (silu, gelu) are not
//! taken here.

use crate::engine::fused::gpu::kernels::args::{
    registers_to_tile, tile_share, Batch, Points, TileRows,
};
use crate::engine::fused::gpu::kernels::colsums::{self, Cols};
use crate::engine::fused::gpu::kernels::down::{backward_layer, delta_rows, hidden_weights};
use crate::engine::fused::gpu::kernels::first;
use crate::engine::fused::gpu::kernels::head::{self, Head};
use crate::engine::fused::gpu::kernels::held;
use crate::engine::fused::gpu::kernels::layers::{At, Layer};
use crate::engine::fused::gpu::kernels::mma::{product, row_stride, BLOCK, PLANE_UNITS};
use crate::engine::fused::gpu::kernels::mma_regs;
use crate::engine::fused::gpu::kernels::ops::cube_sum;
use crate::engine::fused::gpu::kernels::round::to_operand;
use crate::engine::fused::gpu::kernels::rows;
use crate::engine::fused::gpu::kernels::sums::{add_share, Kind, Sum};
use crate::engine::fused::gpu::shape::{Pass, Shape};
use cubecl::prelude::*;

/// Row sets of a tile the pass keeps in shared memory for `layers` hidden
/// layers: one a layer, and one for the δ going down.
pub fn shared_rows(layers: usize) -> usize {
    layers + 1
}

/// Forward, loss and backward over `batch` of `points`; one partial row
/// (`np + 1` values, the loss last) per cube into `partials`, times the
/// batch's scale. `half` holds `params` in the operand type `E` where the
/// plan streams the hidden weights (else it is not written: they are cast
/// into shared memory from `params`).
#[cube(launch_unchecked)]
pub fn tensor_grad<F: Float + CubeElement, E: Float + CubeElement>(
    points: &Points<F>,
    params: &Array<F>,
    half: &Array<E>,
    partials: &mut Array<F>,
    batch: Batch<F>,
    #[comptime] shape: Shape,
    #[comptime] pass: Pass,
) {
    let (inputs, hidden, layers, outputs) =
        comptime!((shape.inputs, shape.hidden, shape.layers, shape.outputs));
    let (act, loss, tile, use_idx) = comptime!((shape.act, shape.loss, pass.tile, pass.use_idx));
    let plan = comptime!(pass.tensor.expect("a tensor-core pass has a plan"));
    let (streamed, regs, held) = comptime!((plan.streamed, plan.regs, plan.held));
    let (cube_units, planes) = comptime!((plan.units, plan.units / PLANE_UNITS as usize));
    let np = comptime!(shape.params());
    let sh = comptime!(row_stride(hidden));
    let plane_rows = comptime!(tile * sh);
    let hh = comptime!(hidden * hidden + hidden);
    // Row stride of the hidden weights as the products read them.
    let ws = comptime!(if streamed { hidden } else { sh });
    let off1 = comptime!(hidden * inputs + hidden);
    let off_out = comptime!(off1 + (layers - 1) * hh);
    let unit = UNIT_POS as usize;
    let row = CUBE_POS * (np + 1);
    let n = batch.count as usize;
    // The hidden-to-hidden layer, forward and backward.
    let forward = comptime!(Layer::new(tile, hidden, hidden, act, false));

    // Tensor-core loads and stores want 32-byte aligned rows. A row set a
    // hidden layer and one more: going down, the layer below's δ goes to a
    // free set while the weight gradient still reads the activations below.
    let mut acts =
        SharedMemory::<E>::new_aligned(comptime!(shared_rows(layers) * tile * sh), 32usize);
    let mut xin = SharedMemory::<F>::new(comptime!(tile * inputs));
    let mut yin = SharedMemory::<F>::new(comptime!(tile * outputs));
    let mut scr = SharedMemory::<F>::new_aligned(comptime!(planes * BLOCK * BLOCK), 32usize);
    let mut red = SharedMemory::<F>::new(cube_units);
    // This unit's shares of the non-product sums, kept over every tile.
    let hd = comptime!(Head {
        tile,
        hidden,
        outputs,
        units: cube_units,
        off_out,
        act,
        loss,
        spirv: pass.spirv,
    });
    let s_bias = comptime!(Sum::of(Kind::Bias, &shape, &pass, cube_units));
    let s_first = comptime!(Sum::of(Kind::First, &shape, &pass, cube_units));
    let mut acc_out = rows::zeroed::<F>(comptime!(hd.slots()));
    let mut acc_bias = rows::zeroed::<F>(comptime!(layers * s_bias.slots()));
    let mut acc_first = rows::zeroed::<F>(comptime!(s_first.slots()));
    // The held layers' weight gradients, `per_held` blocks a layer a plane.
    let per_held = comptime!(held::blocks_a_plane(hidden, planes).unwrap_or(0));
    let mut kept = mma_regs::zeros::<F>(comptime!(held * per_held));
    // The bias and first-layer sums the down products make, where they do.
    let cols = comptime!(Cols::of(&shape, &pass));
    let mut down_sums = rows::zeroed::<F>(comptime!(cols.map_or(1, |c| c.slots())));

    // A cube with no tile still leaves a row (of zeros).
    rows::zero_if_idle::<F>(partials, row, n, np, tile, cube_units);

    // The hidden-to-hidden weights, in shared memory for the whole launch
    // (rows padded like the activations') unless streamed from `half`.
    let w_rows = comptime!(hidden * sh);
    let mut wsm = SharedMemory::<E>::new_aligned(
        comptime!(if streamed {
            BLOCK
        } else {
            (layers - 1) * w_rows
        }),
        32usize,
    );
    // The same shared layout at every compile (`rows::claim`).
    rows::claim::<E>(&mut wsm);
    rows::claim::<E>(&mut acts);
    rows::claim::<F>(&mut scr);
    rows::claim::<F>(&mut red);
    rows::claim::<F>(&mut xin);
    rows::claim::<F>(&mut yin);
    if comptime!(!streamed) {
        rows::hidden_weights_to_shared::<F, E>(
            params,
            &mut wsm,
            shape,
            sh,
            cube_units,
            comptime!(pass.spirv),
        );
    }
    // The first layer's weights this unit uses, where it always takes the
    // same two hidden units.
    let w_first = first::weights::<F>(params, inputs, hidden, cube_units);
    sync_cube();

    let mut lsum = F::new(0.0);
    let mut base = CUBE_POS * tile;
    // Inputs and targets, a tile ahead; points past the end read zeros (and
    // leave a zero δ).
    let x_rows = comptime!(TileRows {
        tile,
        width: inputs,
        stride: inputs,
        use_idx,
    });
    let y_rows = comptime!(TileRows {
        tile,
        width: outputs,
        stride: outputs,
        use_idx,
    });
    let mut xr = Array::<F>::new(comptime!(tile_share(tile, inputs, cube_units)));
    let mut yr = Array::<F>::new(comptime!(tile_share(tile, outputs, cube_units)));
    points.tile_to_registers(&mut xr, &batch, base, unit, x_rows, cube_units, false);
    points.tile_to_registers(&mut yr, &batch, base, unit, y_rows, cube_units, true);
    while base < n {
        let first_tile = base == CUBE_POS * tile;
        registers_to_tile::<F>(&xr, &mut xin, 0usize, unit, x_rows, cube_units);
        registers_to_tile::<F>(&yr, &mut yin, 0usize, unit, y_rows, cube_units);
        let next = base + CUBE_COUNT * tile;
        points.tile_to_registers(&mut xr, &batch, next, unit, x_rows, cube_units, false);
        points.tile_to_registers(&mut yr, &batch, next, unit, y_rows, cube_units, true);
        sync_cube();
        // First hidden layer, f32.
        first::layer::<F, E>(
            &mut acts,
            &xin,
            params,
            &w_first,
            inputs,
            hidden,
            tile,
            cube_units,
            act,
            comptime!(pass.spirv),
        );
        sync_cube();
        // Hidden layers 2..L on the tensor cores.
        for l in 1..layers {
            let at = At {
                off: off1 + (l - 1) * hh,
                src: (l - 1) * plane_rows,
                dst: l * plane_rows,
            };
            let w = hidden_weights::<E>(&wsm, half, l, off1, hh, streamed, w_rows);
            if comptime!(regs) {
                mma_regs::product::<F, E>(
                    &mut acts,
                    &w,
                    params,
                    &at,
                    0,
                    &mut down_sums,
                    &xin,
                    0,
                    forward,
                    ws,
                    planes,
                    None,
                    false,
                );
            } else {
                product::<F, E>(
                    &mut acts,
                    &mut scr,
                    &w,
                    params,
                    &at,
                    0,
                    forward,
                    ws,
                    planes,
                    comptime!(pass.spirv),
                );
            }
            sync_cube();
        }
        // Output layer, f32: loss, output δ (unscaled), the last hidden
        // layer's δ over its activations, this unit's share of the gradient.
        let last = (layers - 1) * plane_rows;
        lsum += head::sweep::<F, E>(
            &mut acts,
            &yin,
            &batch,
            params,
            &mut acc_out,
            base,
            last,
            hd,
        );
        sync_cube();
        // Hidden layers L..2: the weight gradients and the δ of the layer
        // below, in one stretch between barriers; the top `held` layers'
        // weight gradients into `kept`, the others into the partial row.
        #[unroll]
        for r in 1..comptime!(held + 1) {
            backward_layer::<F, E>(
                &mut acts,
                &mut scr,
                &mut kept,
                partials,
                &wsm,
                half,
                params,
                &mut acc_bias,
                &mut down_sums,
                &xin,
                row,
                layers - r,
                first_tile,
                comptime!(Some((r - 1) * per_held)),
                shape,
                pass,
            );
        }
        for r in comptime!(held + 1)..layers {
            backward_layer::<F, E>(
                &mut acts,
                &mut scr,
                &mut kept,
                partials,
                &wsm,
                half,
                params,
                &mut acc_bias,
                &mut down_sums,
                &xin,
                row,
                layers - r,
                first_tile,
                None,
                shape,
                pass,
            );
        }
        // First layer's gradients: Σ_t δ_1·x, Σ_t δ_1.
        // (from the δ rows where the down products did not make them).
        let d_first = delta_rows(0usize, layers) * plane_rows;
        if comptime!(!cols.is_some_and(|c| c.first)) {
            add_share::<F, E>(&mut acc_first, 0, &acts, &xin, d_first, s_first);
        }
        if comptime!(cols.is_none()) {
            add_share::<F, E>(&mut acc_bias, 0, &acts, &xin, d_first, s_bias);
        }
        sync_cube();
        base = next;
    }

    #[unroll]
    for k in 0..held {
        let at = row + off1 + comptime!((layers - 2 - k) * hh);
        held::flush::<F>(&kept, partials, at, comptime!(k * per_held), hidden, planes);
    }
    let total = cube_sum::<F>(lsum * batch.scale, &mut red, comptime!(pass.plane));
    if unit == 0usize {
        partials[row + np] = total;
    }
    head::flush::<F>(&acc_out, &mut red, partials, row + off_out, hd);
    if comptime!(cols.is_some()) {
        colsums::flush::<F>(
            &down_sums,
            &mut scr,
            partials,
            row,
            comptime!(cols.unwrap()),
        );
    }
    rows::finish::<F>(
        &acc_first,
        &acc_bias,
        &mut red,
        partials,
        row,
        batch.scale,
        shape,
        s_first,
        s_bias,
        cols,
    );
    rows::release::<E>(wsm);
    rows::release::<E>(acts);
    rows::release::<F>(scr);
    rows::release::<F>(red);
    rows::release::<F>(xin);
    rows::release::<F>(yin);
}

/// The master weights in the operand type, for the tensor cores (rounded
/// by hand for SPIR-V: `spirv`).
#[cube(launch_unchecked)]
pub fn cast_params<F: Float + CubeElement, E: Float + CubeElement>(
    params: &Array<F>,
    half: &mut Array<E>,
    #[comptime] spirv: bool,
) {
    if ABSOLUTE_POS < params.len() {
        half[ABSOLUTE_POS] = to_operand::<F, E>(params[ABSOLUTE_POS], spirv);
    }
}
