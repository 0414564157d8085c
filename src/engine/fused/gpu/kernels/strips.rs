//! The tensor-core pass with each plane taking its own 16 points through the
//! whole chain of layers ([`crate::engine::fused::gpu::kernels::strip`]):
//! forward, the output layer and every δ below it in registers, with no cube
//! barrier between layers. Where [`crate::engine::fused::gpu::kernels::tensor`]
//! shares every product's output blocks over the cube's planes — a barrier
//! after each, 10 a tile for 3 × 64 — here the planes only meet for the weight
//! gradients, which sum over the whole tile: one barrier after the output
//! layer, one a hidden-to-hidden layer going down, one at the end of the tile.
//!
//! Shared memory holds the weights for the whole launch, the activations of
//! hidden layers 1 … L−1 (the weight gradients read them) and two δ rows (the
//! layer whose weight gradient is being taken, the one below being made); a
//! tile is 16 points a plane. Same partial-row layout, same sums
//! ([`crate::engine::fused::gpu::kernels::sums`]) and the same unscaled δ as
//! the shared-output pass; the products are `mma.sync` on registers, so the
//! device needs manual MMA and `ldmatrix` and the weights in shared memory.

use crate::engine::fused::gpu::kernels::args::{
    registers_to_tile, tile_share, Batch, Points, TileRows,
};
use crate::engine::fused::gpu::kernels::layers::{At, Layer};
use crate::engine::fused::gpu::kernels::mma::{row_stride, BLOCK, PLANE_UNITS};
use crate::engine::fused::gpu::kernels::mma_regs::{position, weight_grads};
use crate::engine::fused::gpu::kernels::ops::cube_sum;
use crate::engine::fused::gpu::kernels::rows;
use crate::engine::fused::gpu::kernels::strip::{self, kept, new_strip, StripHead};
use crate::engine::fused::gpu::kernels::sums::{add_share, Kind, Sum};
use crate::engine::fused::gpu::shape::{Pass, Shape};
use cubecl::prelude::*;

/// Rows of `tile · row_stride(H)` half values the pass keeps in shared
/// memory for `layers` hidden layers: activations of all but the last, two δ.
pub fn strip_rows(layers: usize) -> usize {
    layers + 1
}

/// Output blocks of 16 a product takes at a time for width `hidden`: all of
/// them up to 64, else 4 (32 accumulator registers).
pub fn strip_group(hidden: usize) -> usize {
    (hidden / BLOCK).min(4)
}

/// Forward, loss and backward over `batch` of `points`, as
/// [`crate::engine::fused::gpu::kernels::tensor::tensor_grad`] (same
/// arguments, same partial rows) with each plane taking its strip.
#[cube(launch_unchecked)]
pub fn strips_grad<F: Float + CubeElement, E: Float + CubeElement>(
    points: &Points<F>,
    params: &Array<F>,
    // The operand-type copy of `params`, unused: the strip pass reads its
    // weights from shared memory only (the same arguments as `tensor_grad`).
    _half: &Array<E>,
    partials: &mut Array<F>,
    batch: Batch<F>,
    #[comptime] shape: Shape,
    #[comptime] pass: Pass,
) {
    let (inputs, hidden, layers, outputs) =
        comptime!((shape.inputs, shape.hidden, shape.layers, shape.outputs));
    let (act, loss, tile, use_idx) = comptime!((shape.act, shape.loss, pass.tile, pass.use_idx));
    let plan = comptime!(pass.tensor.expect("a tensor-core pass has a plan"));
    let (cube_units, planes) = comptime!((plan.units, plan.units / PLANE_UNITS as usize));
    let np = comptime!(shape.params());
    let sh = comptime!(row_stride(hidden));
    let rows_of = comptime!(tile * sh);
    let hh = comptime!(hidden * hidden + hidden);
    let off1 = comptime!(hidden * inputs + hidden);
    let off_out = comptime!(off1 + (layers - 1) * hh);
    let group = comptime!(strip_group(hidden));
    let keep = comptime!(kept(hidden));
    // Where the δ of (1-based) layer l is: parity l % 2, after the activations.
    let delta_at = comptime!((layers - 1) * rows_of);
    let unit = UNIT_POS as usize;
    let plane = unit / comptime!(PLANE_UNITS as usize);
    let lane = unit % comptime!(PLANE_UNITS as usize);
    let row0 = plane * BLOCK;
    let row = CUBE_POS * (np + 1);
    let n = batch.count as usize;
    let backward = comptime!(Layer::new(tile, hidden, hidden, act, true));

    let mut acts = SharedMemory::<E>::new_aligned(comptime!(strip_rows(layers) * rows_of), 32usize);
    let w_rows = comptime!(hidden * sh);
    let mut wsm = SharedMemory::<E>::new_aligned(comptime!((layers - 1) * w_rows), 32usize);
    let mut xin = SharedMemory::<F>::new(comptime!(tile * inputs));
    let mut scr = SharedMemory::<F>::new_aligned(comptime!(planes * BLOCK * BLOCK), 32usize);
    let mut red = SharedMemory::<F>::new(comptime!(cube_units.max(planes * hidden)));
    // The shared layout, the same at every compile: NVRTC gives this source
    // 128 registers a unit (two cubes a multiprocessor) with the weights at
    // offset 0 and 129–158 with any other array there (3 × 64, CUDA 13.0;
    // `examples/kernel_source.rs`, then `benches/device/registers.py --orders`).
    rows::claim::<E>(&mut wsm);
    rows::claim::<F>(&mut scr);
    rows::claim::<E>(&mut acts);
    rows::claim::<F>(&mut red);
    rows::claim::<F>(&mut xin);
    let s_bias = comptime!(Sum::of(Kind::Bias, &shape, &pass, cube_units));
    let s_first = comptime!(Sum::of(Kind::First, &shape, &pass, cube_units));
    let hd = comptime!(StripHead {
        hidden,
        outputs,
        off_out,
        act,
        loss,
        use_idx,
    });
    let mut acc_bias = rows::zeroed::<F>(comptime!(layers * s_bias.slots()));
    let mut acc_first = rows::zeroed::<F>(comptime!(s_first.slots()));
    let mut sums = rows::zeroed::<F>(comptime!(outputs + 1));
    let mut grads_out = rows::zeroed::<F>(comptime!(outputs * keep));

    // A cube with no tile still leaves a row (of zeros).
    rows::zero_if_idle::<F>(partials, row, n, np, tile, cube_units);
    rows::hidden_weights_to_shared::<F, E>(params, &mut wsm, shape, sh, cube_units, false);
    sync_cube();

    let mut a = new_strip::<E>(hidden);
    let mut b = new_strip::<E>(hidden);
    let mut base = CUBE_POS * tile;
    // The plane's inputs (its 16 rows, shared over its lanes), a tile ahead;
    // points past the end read zeros (and leave a zero δ).
    let x_rows = comptime!(TileRows {
        tile: BLOCK,
        width: inputs,
        stride: inputs,
        use_idx,
    });
    let lanes = comptime!(PLANE_UNITS as usize);
    let mut xs = Array::<F>::new(comptime!(tile_share(BLOCK, inputs, lanes)));
    let mut ys = Array::<F>::new(comptime!(2 * outputs));
    points.tile_to_registers(&mut xs, &batch, base + row0, lane, x_rows, lanes, false);
    while base < n {
        let first = base == CUBE_POS * tile;
        registers_to_tile::<F>(&xs, &mut xin, row0 * inputs, lane, x_rows, lanes);
        load_targets::<F>(points, &batch, base + row0, &mut ys, outputs, use_idx);
        let next = base + CUBE_COUNT * tile;
        points.tile_to_registers(&mut xs, &batch, next + row0, lane, x_rows, lanes, false);
        sync_plane();
        strip::first_layer::<F, E>(&xin, params, row0, &mut a, inputs, hidden, act);
        strip::store::<E>(&mut acts, &a, row0 * sh, hidden);
        // Layers 2..L (1-based), each into `b`, then `a`.
        #[unroll]
        for l in 2..comptime!(layers + 1) {
            let w = wsm.slice((l - 2) * w_rows, (l - 1) * w_rows);
            let bias_at = off1 + (l - 2) * hh + comptime!(hidden * hidden);
            strip::layer::<F, E>(
                &a, &w, params, &mut acts, bias_at, &mut b, hidden, sh, act, false, group,
            );
            if l < layers {
                strip::store::<E>(&mut acts, &b, (l - 1) * rows_of + row0 * sh, hidden);
            }
            strip::copy::<E>(&b, &mut a, hidden);
        }
        strip::head::<F, E>(
            &a,
            &ys,
            &batch,
            params,
            base + row0,
            &mut b,
            &mut sums,
            &mut grads_out,
            hd,
        );
        let top = delta_at + (layers % 2) * rows_of;
        strip::store::<E>(&mut acts, &b, top + row0 * sh, hidden);
        sync_cube();
        // Layers L..2: the weight gradient over the tile (δ_l, a_{l−1}), the
        // bias sums, and the plane's δ_{l−1} from its δ_l.
        #[unroll]
        for r in 1..layers {
            let l = layers + 1 - r;
            let off = off1 + (l - 2) * hh;
            let d_here = delta_at + (l % 2) * rows_of;
            let a_below = (l - 2) * rows_of;
            let grads = At {
                off: row + off,
                src: a_below,
                dst: d_here,
            };
            weight_grads::<F, E>(&acts, &mut scr, partials, &grads, first, backward, planes);
            add_share::<F, E>(&mut acc_bias, l - 1, &acts, &xin, d_here, s_bias);
            let w = wsm.slice((l - 2) * w_rows, (l - 1) * w_rows);
            strip::copy::<E>(&b, &mut a, hidden);
            strip::layer::<F, E>(
                &a,
                &w,
                params,
                &mut acts,
                a_below + row0 * sh,
                &mut b,
                hidden,
                sh,
                act,
                true,
                group,
            );
            let d_below = delta_at + ((l - 1) % 2) * rows_of;
            strip::store::<E>(&mut acts, &b, d_below + row0 * sh, hidden);
            sync_cube();
        }
        // First layer's gradients from δ_1 (parity 1): Σ_t δ_1·x, Σ_t δ_1.
        let d1 = delta_at + rows_of;
        add_share::<F, E>(&mut acc_first, 0, &acts, &xin, d1, s_first);
        add_share::<F, E>(&mut acc_bias, 0, &acts, &xin, d1, s_bias);
        sync_cube();
        base = next;
    }

    let total = cube_sum::<F>(sums[outputs] * batch.scale, &mut red, comptime!(pass.plane));
    if unit == 0usize {
        partials[row + np] = total;
    }
    // The output layer: weights through `red` (a row of the width a plane),
    // biases by cube sums.
    let (g, c) = position(lane);
    #[unroll]
    for o in 0..outputs {
        #[unroll]
        for k in 0..comptime!(keep / 2) {
            let m = g + k * 8usize;
            if m < comptime!(hidden / 8) {
                #[unroll]
                for i in 0..2usize {
                    red[plane * hidden + m * 8usize + c + i] = grads_out[o * keep + k * 2usize + i];
                }
            }
        }
        sync_cube();
        if unit < hidden {
            let mut t = F::new(0.0);
            #[unroll]
            for p in 0..planes {
                t += red[p * hidden + unit];
            }
            partials[row + off_out + o * hidden + unit] = t;
        }
        sync_cube();
        let d = cube_sum::<F>(sums[o], &mut red, comptime!(pass.plane));
        if unit == 0usize {
            partials[row + off_out + comptime!(outputs * hidden) + o] = d;
        }
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
        None,
    );
    rows::release::<E>(wsm);
    rows::release::<F>(scr);
    rows::release::<E>(acts);
    rows::release::<F>(red);
    rows::release::<F>(xin);
}

/// The targets of the two rows of the plane's points from `first` that this
/// lane's accumulators hold (rows `g` and `g + 8`), per output
/// (`ys[o · 2 + r]`; zeros past the batch's end): loaded before the tile's
/// layers, so the output layer does not wait for them.
#[cube]
fn load_targets<F: Float + CubeElement>(
    points: &Points<F>,
    batch: &Batch<F>,
    first: usize,
    ys: &mut Array<F>,
    #[comptime] outputs: usize,
    #[comptime] use_idx: bool,
) {
    let (g, _) = position((UNIT_POS % PLANE_UNITS) as usize);
    let n = batch.count as usize;
    #[unroll]
    for r in 0..2usize {
        let i = first + g + r * 8usize;
        #[unroll]
        for o in 0..outputs {
            let mut v = F::new(0.0);
            if i < n {
                let p = points.at(batch.start, i, use_idx);
                v = points.y[p * outputs + o];
            }
            ys[o * 2usize + r] = v;
        }
    }
}
