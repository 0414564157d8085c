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
//! [`MAX_GPU_PARAMS`]: crate::engine::fused::gpu_kernel_limits::MAX_GPU_PARAMS

use crate::config::Activation;
use crate::engine::fused::gpu::kernels::args::{Batch, Points, TileRows};
use crate::engine::fused::gpu::kernels::layers::{
    backward, dense, hidden_forward, hidden_rows, stride, At, Layer,
};
use crate::engine::fused::gpu::kernels::math::{loss_grad, loss_value};
use crate::engine::fused::gpu::kernels::ops::{cube_sum, cubes_by_shared};
use crate::engine::fused::gpu::shape::{Blocks, Pass, Shape};
use cubecl::prelude::*;

/// Largest tile: past it, bigger tiles only add idle tail work.
pub const MAX_TILE: usize = 128;

/// Shared memory the tiled kernel takes of a device with less than twice
/// this per cube: all of it up to this (the WebGPU floor of 16 KiB at least).
pub const TILE_SHARED_BYTES: usize = 48 * 1024;

/// Shared memory every WebGPU device has per workgroup, in bytes.
const WEBGPU_SHARED_BYTES: usize = 16 * 1024;

/// Values the cube sum of the loss needs in shared memory.
const LOSS_SCRATCH: usize = 256;

/// Shared-memory values one point of a tile needs: inputs, every hidden
/// layer's rows, output deltas (each row padded to an odd stride).
pub fn tile_values(s: &Shape) -> usize {
    stride(s.inputs) + hidden_rows(s.act) * s.layers * stride(s.hidden) + stride(s.outputs)
}

/// Points a tile needs for the layer passes' full register blocks (4 or 8
/// points, `gpu/tiled_plan.rs`); fewer take blocks of 2 (more loads a
/// multiply-add, but a block for every unit).
pub const FULL_BLOCKS: usize = 32;

/// Shared-memory bytes a cube of `s`'s model takes on a device with
/// `max_shared` bytes per cube: up to [`TILE_SHARED_BYTES`]; where that holds
/// fewer than [`FULL_BLOCKS`] points (wide deep models: 23 at 4 × 128) and
/// half the device's is more (CUDA's opt-in 227 KiB), that half — two cubes a
/// multiprocessor, tiles 2.4× larger (4 × 128 on the H200: 4.38 → 3.15 s per
/// 100 steps; 3 × 64's 61-point tiles were faster than 128-point ones,
/// docs/PERFORMANCE.md).
pub fn tile_budget(s: &Shape, max_shared: usize) -> usize {
    let base = max_shared.clamp(WEBGPU_SHARED_BYTES, TILE_SHARED_BYTES);
    if points(s, base) < FULL_BLOCKS {
        base.max(max_shared / 2)
    } else {
        base
    }
}

/// Points a tile of `bytes` holds (before the clamp to 1 ..= [`MAX_TILE`]).
fn points(s: &Shape, bytes: usize) -> usize {
    (bytes / 4).saturating_sub(LOSS_SCRATCH) / tile_values(s)
}

/// Points a tile holds on a device with `max_shared` bytes of shared memory
/// per cube (at least 1: the widest model of the envelope needs 9.4 KiB for one point).
pub fn tile_points(s: &Shape, max_shared: usize) -> usize {
    points(s, tile_budget(s, max_shared)).clamp(1, MAX_TILE)
}

/// Cubes of the tiled kernel with tiles of `tile` points that one
/// multiprocessor of `per_sm_shared` bytes holds by shared memory (the driver
/// keeps 1 KiB a cube), at least 1.
pub fn resident_cubes(s: &Shape, tile: usize, per_sm_shared: usize) -> usize {
    cubes_by_shared((tile * tile_values(s) + LOSS_SCRATCH) * 4, per_sm_shared).max(1)
}

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
    let np = comptime!(shape.params());
    let start = batch.start;
    let scale = batch.scale;
    let units = CUBE_DIM as usize;
    let unit = UNIT_POS as usize;
    let row = CUBE_POS * (np + 1);
    let per = comptime!(tile_values(&shape));
    let mut buf = SharedMemory::<F>::new(comptime!(tile * per));
    let mut red = SharedMemory::<F>::new(LOSS_SCRATCH);
    let si = comptime!(stride(inputs));
    // Offsets in `buf`: hidden layer 1's rows, one hidden layer's rows, its a
    // within them, the output deltas. A layer's δ goes over its first row.
    let z1 = comptime!(tile * stride(inputs));
    let pair = comptime!(hidden_rows(act) * tile * stride(hidden));
    let a_at = comptime!((hidden_rows(act) - 1) * tile * stride(hidden));
    let dout = comptime!(tile * stride(inputs) + layers * hidden_rows(act) * tile * stride(hidden));
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
    let out = comptime!(layer(tile, hidden, outputs, act, true, blocks));
    let rows = comptime!(TileRows {
        tile,
        inputs,
        stride: si,
        use_idx,
    });
    let mut lsum = F::new(0.0);
    let n = batch.count as usize;
    let mut base = CUBE_POS * tile;
    while base < n {
        let first = base == CUBE_POS * tile;
        // Inputs of the tile; points past the end read zeros.
        points.load_tile(&mut buf, &batch, base, rows);
        sync_cube();

        // Forward. Hidden layers past the first share one loop body (runtime
        // offsets): unrolling every layer made lavapipe's compiler take minutes.
        let first_in = comptime!(layer(tile, inputs, hidden, act, false, blocks));
        hidden_forward::<F>(params, &mut buf, &first_layer, first_in);
        sync_cube();
        for l in 1..layers {
            let dst = z1 + l * pair;
            let at = At {
                off: off1 + (l - 1) * hh,
                src: dst - pair + a_at,
                dst,
            };
            let inner = comptime!(layer(tile, hidden, hidden, act, false, blocks));
            hidden_forward::<F>(params, &mut buf, &at, inner);
            sync_cube();
        }
        let mut e = unit;
        while e < comptime!(tile * outputs) {
            let t = e % tile;
            let u = e / tile;
            let z = dense::<F>(params, &buf, &out_layer, t, u, out);
            let mut d = F::new(0.0);
            if base + t < n {
                let pt = points.at(start, base + t, use_idx);
                let r = z - points.y[pt * outputs + u];
                lsum += loss_value::<F>(r, loss);
                d = loss_grad::<F>(r, loss) * scale;
            }
            buf[dout + t * comptime!(stride(outputs)) + u] = d;
            e += units;
        }
        sync_cube();

        // Backward, from the output layer down.
        backward::<F>(params, &mut buf, partials, row, first, &out_layer, out);
        sync_cube();
        for r in 1..layers {
            let l = layers - r;
            let delta = z1 + l * pair;
            let at = At {
                off: off1 + (l - 1) * hh,
                src: delta - pair + a_at,
                dst: delta,
            };
            let inner = comptime!(layer(tile, hidden, hidden, act, true, blocks));
            backward::<F>(params, &mut buf, partials, row, first, &at, inner);
            sync_cube();
        }
        backward::<F>(
            params,
            &mut buf,
            partials,
            row,
            first,
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
}

/// The layer a layer function is compiled for: `blocks`, narrowed where the
/// layer is narrower (the first layer's inputs, the output layer's units).
fn layer(
    tile: usize,
    in_w: usize,
    out_w: usize,
    act: Activation,
    below: bool,
    blocks: Blocks,
) -> Layer {
    let fit = |n: usize, w: usize| n.min(w.next_power_of_two());
    Layer {
        tile,
        in_w,
        out_w,
        act,
        below,
        blocks: Blocks {
            grad_u: fit(blocks.grad_u, out_w),
            grad_k: fit(blocks.grad_k, in_w),
            ..blocks
        },
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fused::envelope::{MAX_HIDDEN, MAX_IO, MAX_LAYERS};

    use crate::config::{Loss, OptimizerKind};

    fn shape(io: usize, hidden: usize, layers: usize, act: Activation) -> Shape {
        Shape {
            inputs: io,
            hidden,
            layers,
            outputs: io,
            act,
            loss: Loss::Mse,
            opt: OptimizerKind::Sgd,
        }
    }

    /// gelu keeps z and a: the widest rows.
    const GELU: Activation = Activation::Gelu;
    const RELU: Activation = Activation::Relu;

    #[test]
    fn the_widest_model_fits_a_point_in_the_smallest_shared_memory() {
        let per = tile_values(&shape(MAX_IO, MAX_HIDDEN, MAX_LAYERS, GELU));
        assert!(LOSS_SCRATCH + per <= WEBGPU_SHARED_BYTES / 4);
        let relu = tile_values(&shape(MAX_IO, MAX_HIDDEN, MAX_LAYERS, RELU));
        assert!(relu < per, "relu keeps one row a hidden layer");
        assert_eq!(
            tile_points(&shape(MAX_IO, MAX_HIDDEN, MAX_LAYERS, GELU), 0),
            (WEBGPU_SHARED_BYTES / 4 - LOSS_SCRATCH) / per
        );
    }

    #[test]
    fn small_models_take_the_largest_tile() {
        assert_eq!(tile_points(&shape(1, 10, 2, RELU), 1 << 20), MAX_TILE);
        assert!(tile_points(&shape(1, 64, 3, GELU), 48 * 1024) < MAX_TILE);
    }

    /// The H200's shared memory per cube (CUDA's opt-in maximum), in bytes.
    const H200: usize = 227 * 1024;

    #[test]
    fn wide_models_take_half_a_large_shared_memory_for_tiles_of_full_blocks() {
        let (wide, deep) = (shape(1, 128, 4, RELU), shape(1, 64, 3, RELU));
        // 4 × 128: 23 points in 48 KiB; half of CUDA's 227 KiB where it has it.
        assert_eq!(tile_budget(&wide, 48 * 1024), 48 * 1024);
        assert_eq!(tile_budget(&wide, 64 * 1024), 48 * 1024);
        assert_eq!(tile_budget(&wide, H200), H200 / 2);
        assert_eq!(tile_points(&wide, 48 * 1024), 23);
        assert_eq!(tile_points(&wide, H200), 55);
        assert_eq!(resident_cubes(&wide, 55, H200), 2);
        // 3 × 64 fills its blocks in 48 KiB: 61 points, four cubes a multiprocessor.
        assert_eq!(tile_budget(&deep, H200), 48 * 1024);
        assert_eq!(tile_points(&deep, H200), 61);
        assert_eq!(resident_cubes(&deep, 61, H200), 4);
        assert_eq!(tile_budget(&deep, 32 * 1024), 32 * 1024);
        assert_eq!(resident_cubes(&wide, 23, 48 * 1024), 1);
    }
}
