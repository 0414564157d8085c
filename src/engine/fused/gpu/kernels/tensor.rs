//! The fused GPU pass on tensor cores (CubeCL `cmma`): deep models in half
//! precision, f32 accumulation, f32 master weights.
//!
//! Like [`crate::engine::fused::gpu::kernels::tiled`], a cube takes a tile of
//! `tile` points at a time and writes one partial gradient row (the same
//! layout, summed by the same `reduce_update`). The hidden-to-hidden layers —
//! where a deep model's arithmetic is — are 16×16×16 matrix products on the
//! tensor cores ([`crate::engine::fused::gpu::kernels::mma`]), their weights
//! resident in shared memory for the whole launch:
//!
//! - forward: `Z = A·Wᵀ` for the tile, then bias and activation in f32,
//!   stored back as half values;
//! - backward: the weight gradient `δᵀ·A` in f32, added into the cube's
//!   partial row once per tile, then `δ_below = (δ·W) ⊙ act'(a)` written over
//!   the layer below's activations.
//!
//! Every hidden layer's activations stay in shared memory, in the operand
//! type `E` (f16 or bf16); the first layer (few inputs) and the output layer
//! (few outputs) are plain f32 arithmetic, and the sums over the tile that
//! are not matrix products are shared by every unit
//! ([`crate::engine::fused::gpu::kernels::sums`]). The output δ is *not*
//! multiplied by the batch's scale (1/N would underflow f16): the row is
//! scaled once at the end, so f16 needs no loss scaling for losses of
//! ordinary size. Activations whose derivative needs z (silu, gelu) are not
//! taken here.

use crate::engine::fused::gpu::kernels::args::{Batch, Points, TileRows};
use crate::engine::fused::gpu::kernels::layers::{At, Layer};
use crate::engine::fused::gpu::kernels::math::{act_bwd_at, act_fwd, loss_grad, loss_value};
use crate::engine::fused::gpu::kernels::mma::{product, row_stride, weight_grads, BLOCK, PLANES};
use crate::engine::fused::gpu::kernels::ops::cube_sum;
use crate::engine::fused::gpu::kernels::sums::{add_share, flush, Kind, Sum, UNITS};
use crate::engine::fused::gpu::shape::{keeps_z, Pass, Shape};
use cubecl::prelude::*;

/// Values the loss sum (and the sums' final combine) needs in shared memory:
/// one a unit.
const LOSS_SCRATCH: usize = UNITS;

/// Whether the tensor-core pass takes `s`: two or more hidden layers of a
/// width that is a multiple of [`BLOCK`] (16–128), an activation whose
/// derivative follows from its value.
pub fn takes(s: &Shape) -> bool {
    s.layers >= 2 && s.hidden.is_multiple_of(BLOCK) && s.hidden >= BLOCK && !keeps_z(s.act)
}

/// Shared-memory bytes for a tile of `tile` points: the activations, the
/// hidden-to-hidden weights (resident for the whole launch), f32 scratch.
pub fn tile_bytes(s: &Shape, tile: usize) -> usize {
    let acts = (s.layers * tile + (s.layers - 1) * s.hidden) * row_stride(s.hidden) * 2;
    let f32s = tile * (s.inputs + s.outputs) + PLANES * BLOCK * BLOCK + LOSS_SCRATCH;
    acts + f32s * 4
}

/// Points a tile holds with `max_shared` bytes of shared memory per cube:
/// 128 or 64 if three cubes can then share a multiprocessor (one computes
/// while the others wait on loads), else the largest of 128 … 16 that fits
/// (None when not even 16 does).
pub fn tile_points(s: &Shape, max_shared: usize) -> Option<usize> {
    let fits = |t: &usize, room: usize| tile_bytes(s, *t) <= room;
    [128, 64]
        .into_iter()
        .find(|t| fits(t, max_shared / 3))
        .or_else(|| [128, 64, 32, 16].into_iter().find(|t| fits(t, max_shared)))
}

/// Units sharing each output's dot product over `hidden` values, for
/// `outs` outputs a tile: as many as the cube has for each (at most 16), or 1
/// (the partial sums, `split × outs` ≤ 2048, fit the planes' scratch).
fn out_split(outs: usize, hidden: usize) -> usize {
    (UNITS / outs).clamp(1, 16).min(hidden)
}

/// The non-product sum `kind` of `s`'s model over tiles of `tile` points.
fn sum_of(kind: Kind, s: &Shape, tile: usize) -> Sum {
    Sum {
        kind,
        tile,
        inputs: s.inputs,
        hidden: s.hidden,
        outputs: s.outputs,
    }
}

/// Forward, loss and backward over `batch` of `points`; one partial row
/// (`np + 1` values, the loss last) per cube into `partials`, times the
/// batch's scale. `half` holds `params` in the operand type `E`.
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
    let np = comptime!(shape.params());
    let sh = comptime!(row_stride(hidden));
    let plane_rows = comptime!(tile * sh);
    let hh = comptime!(hidden * hidden + hidden);
    let off1 = comptime!(hidden * inputs + hidden);
    let off_out = comptime!(off1 + (layers - 1) * hh);
    let unit = UNIT_POS as usize;
    let units = CUBE_DIM as usize;
    let row = CUBE_POS * (np + 1);
    let n = batch.count as usize;
    // The hidden-to-hidden layer, forward and backward.
    let forward = comptime!(Layer {
        tile,
        in_w: hidden,
        out_w: hidden,
        act,
        below: false,
    });
    let backward = comptime!(Layer {
        below: true,
        ..forward
    });

    // Tensor-core loads and stores want 32-byte aligned rows.
    let mut acts = SharedMemory::<E>::new_aligned(comptime!(layers * tile * sh), 32usize);
    let mut xin = SharedMemory::<F>::new(comptime!(tile * inputs));
    let mut dout = SharedMemory::<F>::new(comptime!(tile * outputs));
    let mut scr = SharedMemory::<F>::new_aligned(comptime!(PLANES * BLOCK * BLOCK), 32usize);
    let mut red = SharedMemory::<F>::new(LOSS_SCRATCH);
    // This unit's shares of the non-product sums, kept over every tile.
    let s_out = comptime!(sum_of(Kind::Output, &shape, tile));
    let s_bias = comptime!(sum_of(Kind::Bias, &shape, tile));
    let s_first = comptime!(sum_of(Kind::First, &shape, tile));
    let mut acc_out = Array::<F>::new(comptime!(s_out.slots()));
    let mut acc_bias = Array::<F>::new(layers);
    let mut acc_first = Array::<F>::new(comptime!(s_first.slots()));
    #[unroll]
    for k in 0..comptime!(s_out.slots()) {
        acc_out[k] = F::new(0.0);
    }
    #[unroll]
    for k in 0..layers {
        acc_bias[k] = F::new(0.0);
    }
    #[unroll]
    for k in 0..comptime!(s_first.slots()) {
        acc_first[k] = F::new(0.0);
    }

    // A cube with no tile still leaves a row (of zeros).
    if CUBE_POS * tile >= n {
        let mut p = unit;
        while p < np {
            partials[row + p] = F::new(0.0);
            p += units;
        }
    }

    // The hidden-to-hidden weights, in shared memory for the whole launch
    // (rows padded like the activations').
    let w_rows = comptime!(hidden * sh);
    let mut wsm = SharedMemory::<E>::new_aligned(comptime!((layers - 1) * hidden * sh), 32usize);
    let mut k = unit;
    while k < comptime!((layers - 1) * hidden * hidden) {
        let l = k / comptime!(hidden * hidden);
        let r = k % comptime!(hidden * hidden);
        wsm[l * w_rows + (r / hidden) * sh + r % hidden] = half[off1 + l * hh + r];
        k += units;
    }
    sync_cube();

    let mut lsum = F::new(0.0);
    let mut base = CUBE_POS * tile;
    while base < n {
        let first = base == CUBE_POS * tile;
        // Inputs; points past the end read zeros (and leave a zero δ).
        let rows = comptime!(TileRows {
            tile,
            inputs,
            stride: inputs,
            use_idx,
        });
        points.load_tile(&mut xin, &batch, base, rows);
        sync_cube();
        // First hidden layer, f32.
        let mut e = unit;
        while e < comptime!(tile * hidden) {
            let t = e / hidden;
            let j = e % hidden;
            let mut z = params[comptime!(hidden * inputs) + j];
            #[unroll]
            for a in 0..inputs {
                z += params[j * inputs + a] * xin[t * inputs + a];
            }
            acts[t * sh + j] = E::cast_from(act_fwd::<F>(z, act));
            e += units;
        }
        sync_cube();
        // Hidden layers 2..L on the tensor cores.
        for l in 1..layers {
            let at = At {
                off: off1 + (l - 1) * hh,
                src: (l - 1) * plane_rows,
                dst: l * plane_rows,
            };
            let w = wsm.slice((l - 1) * w_rows, l * w_rows);
            product::<F, E>(&mut acts, &mut scr, &w, params, &at, forward);
            sync_cube();
        }
        // Output layer, f32: each output's dot product split over `split`
        // units (partial sums in the planes' scratch), then loss and output δ
        // (unscaled).
        let last = (layers - 1) * plane_rows;
        let outs = comptime!(tile * outputs);
        let split = comptime!(out_split(tile * outputs, hidden));
        let mut u = unit;
        while u < comptime!(split * tile * outputs) {
            let e = u % outs;
            let part = u / outs;
            let t = e / outputs;
            let o = e % outputs;
            let mut z = F::new(0.0);
            let mut j = part;
            while j < hidden {
                z += params[off_out + o * hidden + j] * F::cast_from(acts[last + t * sh + j]);
                j += split;
            }
            scr[u] = z;
            u += units;
        }
        sync_cube();
        let mut e = unit;
        while e < outs {
            let t = e / outputs;
            let o = e % outputs;
            let mut z = params[off_out + comptime!(outputs * hidden) + o];
            #[unroll]
            for q in 0..split {
                z += scr[q * outs + e];
            }
            let mut d = F::new(0.0);
            if base + t < n {
                let p = points.at(batch.start, base + t, use_idx);
                let r = z - points.y[p * outputs + o];
                lsum += loss_value::<F>(r, loss);
                d = loss_grad::<F>(r, loss);
            }
            dout[e] = d;
            e += units;
        }
        sync_cube();
        // Output layer's gradients: Σ_t δ_out·a_L, Σ_t δ_out.
        add_share::<F, E>(&mut acc_out, 0, &acts, &dout, last, s_out);
        sync_cube();
        // δ of the last hidden layer, over its activations.
        let mut e = unit;
        while e < comptime!(tile * hidden) {
            let t = e / hidden;
            let j = e % hidden;
            let mut s = F::new(0.0);
            #[unroll]
            for o in 0..outputs {
                s += dout[t * outputs + o] * params[off_out + o * hidden + j];
            }
            let i = last + t * sh + j;
            acts[i] = E::cast_from(s * act_bwd_at::<F>(F::cast_from(acts[i]), act));
            e += units;
        }
        sync_cube();
        // Hidden layers L..2: weight gradients, then δ of the layer below.
        for r in 1..layers {
            let l = layers - r;
            let off = off1 + (l - 1) * hh;
            // The gradient entries at `off` of the row, from δ (`dst`) and the a below (`src`).
            let grads = At {
                off: row + off,
                src: (l - 1) * plane_rows,
                dst: l * plane_rows,
            };
            weight_grads::<F, E>(&acts, &mut scr, partials, &grads, first, backward);
            add_share::<F, E>(&mut acc_bias, l, &acts, &dout, l * plane_rows, s_bias);
            sync_cube();
            // δ (`src`) times the weights, over the a below (`dst`).
            let down = At {
                off,
                src: l * plane_rows,
                dst: (l - 1) * plane_rows,
            };
            let w = wsm.slice((l - 1) * w_rows, l * w_rows);
            product::<F, E>(&mut acts, &mut scr, &w, params, &down, backward);
            sync_cube();
        }
        // First layer's gradients: Σ_t δ_1·x, Σ_t δ_1.
        add_share::<F, E>(&mut acc_first, 0, &acts, &xin, 0, s_first);
        add_share::<F, E>(&mut acc_bias, 0, &acts, &dout, 0, s_bias);
        sync_cube();
        base += CUBE_COUNT * tile;
    }

    let total = cube_sum::<F>(lsum * batch.scale, &mut red, comptime!(pass.plane));
    if unit == 0usize {
        partials[row + np] = total;
    }
    flush::<F>(&acc_out, 0, &mut red, partials, row + off_out, s_out);
    flush::<F>(&acc_first, 0, &mut red, partials, row, s_first);
    let at_first_bias = row + comptime!(hidden * inputs);
    flush::<F>(&acc_bias, 0, &mut red, partials, at_first_bias, s_bias);
    for l in 1..layers {
        let at = row + off1 + (l - 1) * hh + comptime!(hidden * hidden);
        flush::<F>(&acc_bias, l, &mut red, partials, at, s_bias);
    }
    sync_cube();
    // The δs were unscaled: scale the cube's row once.
    let mut p = unit;
    while p < np {
        partials[row + p] *= batch.scale;
        p += units;
    }
}

/// The master weights in the operand type, for the tensor cores.
#[cube(launch_unchecked)]
pub fn cast_params<F: Float + CubeElement, E: Float + CubeElement>(
    params: &Array<F>,
    half: &mut Array<E>,
) {
    if ABSOLUTE_POS < params.len() {
        half[ABSOLUTE_POS] = E::cast_from(params[ABSOLUTE_POS]);
    }
}
