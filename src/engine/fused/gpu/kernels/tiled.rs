//! The fused GPU pass for models the per-point kernels cannot hold: several
//! hidden layers, or one layer with more than [`MAX_GPU_PARAMS`] parameters.
//!
//! A cube takes a tile of `tile` points at a time (grid-stride over tiles).
//! The tile's inputs, every hidden layer's activations `a` (and
//! pre-activations `z` where the activation's derivative needs them: silu,
//! gelu), and the output deltas live in shared memory, one row per point with
//! an odd stride (so units reading one column of different points hit
//! different banks); the weights are read from the device buffer (the same
//! for every cube, so they stay cached). Forward, layer by layer; backward,
//! from the output down: each layer is a small matrix product over the tile
//! that the cube's units share out in register blocks ([`crate::engine::fused::gpu::kernels::layers`]).
//! Each unit owns a fixed set of weight-gradient entries and adds Σ over the
//! tile of δ·a into its cube's partial row in device memory (no other unit
//! touches them: no atomics), while the units also turn the layer below's
//! first row (z, or a) into its δ in place. A barrier or two per layer.
//!
//! The partial rows have the layout of [`crate::engine::fused::gpu::kernels::fused::fused_grad`]'s
//! (`partials[cube][p]`, the loss last), so the same `reduce_update` sums them
//! and steps the optimizer: two launches per optimizer step. Points past the
//! end of the micro-batch enter with zero inputs and leave a zero δ, so they
//! add nothing. The order of every sum is fixed: deterministic.
//!
//! In f16/bf16 on a device or model without the tensor-core pass (`pass.half`),
//! the hidden-to-hidden products take operands rounded to that type
//! ([`crate::engine::fused::gpu::kernels::round`]: `params` holds the
//! rounded weights, the activations and δs are rounded as they are
//! stored), the δs leave the output layer unscaled and each cube's row is
//! scaled on its last tile: the numerics of the tensor cores (and of the
//! CPU engine) at f32's speed.
//!
//! [`MAX_GPU_PARAMS`]: crate::engine::fused::gpu_kernel_limits::MAX_GPU_PARAMS

use crate::config::Activation;
use crate::engine::fused::gpu::kernels::args::{Batch, Points, TileRows};
use crate::engine::fused::gpu::kernels::layers::{
    backward, dense, hidden_forward, hidden_rows, stride, At, Layer,
};
use crate::engine::fused::gpu::kernels::lined::{self, LINE};
use crate::engine::fused::gpu::kernels::math::{loss_grad, loss_value};
use crate::engine::fused::gpu::kernels::ops::cube_sum;
use crate::engine::fused::gpu::kernels::rows;
use crate::engine::fused::gpu::kernels::tile::{
    first_rows, hidden_stride, tile_values, LOSS_SCRATCH,
};
use crate::engine::fused::gpu::shape::{Blocks, Pass, Shape};
use crate::engine::fused::half::Half;
use cubecl::prelude::*;

/// Forward, loss and backward over `batch` of `points` for an MLP of
/// `layers` hidden layers of `hidden` units, times the batch's scale; one
/// partial row per cube into `partials` (`np + 1` values each).
#[cube(launch, launch_unchecked)]
pub fn tiled_grad<F: Float + CubeElement>(
    points: &Points<F>,
    params: &Array<F>,
    partials: &mut Array<F>,
    batch: Batch<F>,
    #[comptime] shape: Shape,
    #[comptime] pass: Pass,
) {
    let inputs = comptime!(shape.inputs);
    let hidden = comptime!(shape.hidden);
    let layers = comptime!(shape.layers);
    let outputs = comptime!(shape.outputs);
    let act = comptime!(shape.act);
    let loss = comptime!(shape.loss);
    let use_idx = comptime!(pass.use_idx);
    let plane = comptime!(pass.plane);
    let tile = comptime!(pass.tile);
    let blocks = comptime!(pass.blocks);
    let half = comptime!(pass.half);
    let np = comptime!(shape.params());
    let start = batch.start;
    let scale = batch.scale;
    let units = CUBE_DIM as usize;
    let unit = UNIT_POS as usize;
    let row = CUBE_POS * (np + 1);
    let lined = comptime!(blocks.lined);
    let per = comptime!(tile_values(&shape, lined));
    let mut buf = SharedMemory::<F>::new(comptime!(tile * per + LINE));
    let mut red = SharedMemory::<F>::new(LOSS_SCRATCH);
    // Placed in this order at every compile, the tile first (`rows::claim`;
    // in a hash set's order otherwise: 94 or 96 registers at 2 × 32, one
    // layout or the other a process).
    rows::claim::<F>(&mut buf);
    rows::claim::<F>(&mut red);
    let si = comptime!(stride(inputs));
    // Offsets in `buf`: hidden layer 1's rows, one hidden layer's rows, its a
    // within them, the output deltas. A layer's δ goes over its first row.
    let sh = comptime!(hidden_stride(hidden, lined));
    let z1 = comptime!(first_rows(tile, inputs));
    let pair = comptime!(hidden_rows(act) * tile * sh);
    let a_at = comptime!((hidden_rows(act) - 1) * tile * sh);
    let dout = comptime!(first_rows(tile, inputs) + layers * hidden_rows(act) * tile * sh);
    let hh = comptime!(hidden * hidden + hidden);
    let off1 = comptime!(layer_offset(inputs, hidden, 1));
    let off_out = comptime!(layer_offset(inputs, hidden, layers));

    // A cube with no tile still leaves a row (of zeros); the others write
    // theirs on their first tile.
    if CUBE_POS * tile >= batch.count as usize {
        let mut p = unit;
        while p < np {
            partials[row + p] = F::new(0.0);
            p += units;
        }
    }

    // The first hidden layer reads the inputs; the output layer reads the last
    // hidden layer's a and writes the output δ (backward: the last layer's δ).
    let first_layer = At {
        off: 0,
        src: 0,
        dst: z1,
    };
    let out_layer = At {
        off: off_out,
        src: dout - pair + a_at,
        dst: dout,
    };
    let so = comptime!(stride(outputs));
    let (out, first_in, inner_fwd, inner_bwd) = comptime!({
        let l = |i, o, below| layer(tile, i, o, act, below, blocks, half);
        let (h, x, y) = ((hidden, sh), (inputs, si), (outputs, so));
        (l(h, y, true), l(x, h, false), l(h, h, false), l(h, h, true))
    });
    // δs unscaled with emulated half precision: the row is scaled at the end.
    let d_scale = if comptime!(half.is_some()) {
        F::new(1.0)
    } else {
        scale
    };
    let rows = comptime!(TileRows {
        tile,
        width: inputs,
        stride: si,
        use_idx,
    });
    let mut lsum = F::new(0.0);
    let n = batch.count as usize;
    let mut base = CUBE_POS * tile;
    while base < n {
        let first = base == CUBE_POS * tile;
        // The rows' factor on the cube's last tile (emulated half precision).
        let mut end = F::new(1.0);
        if base + CUBE_COUNT * tile >= n {
            end = scale;
        }
        // Inputs of the tile; points past the end read zeros.
        points.load_tile(&mut buf, &batch, base, rows);
        sync_cube();

        // Forward. Hidden layers past the first share one loop body (runtime
        // offsets): unrolling every layer made lavapipe's compiler take minutes.
        // Hidden layer l's a is an operand when layer l + 1 is hidden too.
        if comptime!(lined) {
            lined::forward::<F>(params, &mut buf, &first_layer, first_in);
        } else {
            hidden_forward::<F>(params, &mut buf, &first_layer, layers > 1, first_in);
        }
        sync_cube();
        for l in 1..layers {
            let dst = z1 + l * pair;
            let at = At {
                off: off1 + (l - 1) * hh,
                src: dst - pair + a_at,
                dst,
            };
            if comptime!(lined) {
                lined::forward::<F>(params, &mut buf, &at, inner_fwd);
            } else {
                hidden_forward::<F>(params, &mut buf, &at, l + 1 < layers, inner_fwd);
            }
            sync_cube();
        }
        let mut e = unit;
        while e < comptime!(tile * outputs) {
            let t = e % tile;
            let u = e / tile;
            let z = if comptime!(lined) {
                lined::dense::<F>(params, &buf, &out_layer, t, u, out)
            } else {
                dense::<F>(params, &buf, &out_layer, t, u, out)
            };
            let mut d = F::new(0.0);
            if base + t < n {
                let pt = points.at(start, base + t, use_idx);
                let r = z - points.y[pt * outputs + u];
                lsum += loss_value::<F>(r, loss);
                d = loss_grad::<F>(r, loss) * d_scale;
            }
            buf[dout + t * so + u] = d;
            e += units;
        }
        sync_cube();

        // Backward, from the output layer down; hidden layer l's δ is an
        // operand when layer l is hidden-to-hidden (l ≥ 2).
        let rows_at = Rows::<F> { row, first, end };
        any_backward::<F>(
            params,
            &mut buf,
            partials,
            rows_at,
            layers > 1,
            &out_layer,
            out,
        );
        sync_cube();
        for r in 1..layers {
            let l = layers - r;
            let delta = z1 + l * pair;
            let at = At {
                off: off1 + (l - 1) * hh,
                src: delta - pair + a_at,
                dst: delta,
            };
            any_backward::<F>(params, &mut buf, partials, rows_at, l > 1, &at, inner_bwd);
            sync_cube();
        }
        backward::<F>(
            params,
            &mut buf,
            partials,
            row,
            first,
            end,
            false,
            &first_layer,
            first_in,
        );
        sync_cube();
        base += CUBE_COUNT * tile;
    }

    let total = cube_sum::<F>(lsum * scale, &mut red, plane);
    if unit == 0usize {
        partials[row + np] = total;
    }
    rows::release::<F>(buf);
    rows::release::<F>(red);
}

/// Where a tile's gradients go in the partial rows: the cube's row, whether
/// this is its first tile, the rows' factor on its last ([`backward`]).
#[derive(CubeType, Clone, Copy)]
struct Rows<F: Float> {
    row: usize,
    first: bool,
    end: F,
}

/// Backward through the hidden or output layer `at`: the lined pass where
/// the layer's blocks say so (never with emulated half precision), else the
/// one-value pass (`round`: the δ below is an operand).
#[cube]
fn any_backward<F: Float>(
    params: &Array<F>,
    buf: &mut SharedMemory<F>,
    partials: &mut Array<F>,
    to: Rows<F>,
    round: bool,
    at: &At,
    #[comptime] layer: Layer,
) {
    if comptime!(layer.blocks.lined) {
        lined::backward::<F>(params, buf, partials, to.row, to.first, at, layer);
    } else {
        backward::<F>(
            params, buf, partials, to.row, to.first, to.end, round, at, layer,
        );
    }
}

/// The layer a layer function is compiled for, its input and output rows'
/// (width, stride): `blocks`, narrowed where the layer is narrower (the first
/// layer's inputs, the output layer's units); `half`: the emulated operand
/// type.
fn layer(
    tile: usize,
    (in_w, si): (usize, usize),
    (out_w, so): (usize, usize),
    act: Activation,
    below: bool,
    blocks: Blocks,
    half: Option<Half>,
) -> Layer {
    let fit = |n: usize, w: usize| n.min(w.next_power_of_two());
    Layer {
        blocks: Blocks {
            grad_u: fit(blocks.grad_u, out_w),
            grad_k: fit(blocks.grad_k, in_w),
            ..blocks
        },
        si,
        so,
        half,
        ..Layer::new(tile, in_w, out_w, act, below)
    }
}

/// Offset in the flat parameters of layer `l`'s weights (`Params::flatten`:
/// each layer's weights, out × in, then its biases).
fn layer_offset(inputs: usize, hidden: usize, l: usize) -> usize {
    if l == 0 {
        0
    } else {
        hidden * inputs + hidden + (l - 1) * (hidden * hidden + hidden)
    }
}
