//! The tiled kernel's tile ([`crate::engine::fused::gpu::kernels::tiled`]):
//! where its rows lie in shared memory and how many points it holds on a
//! device — the inputs, every hidden layer's rows and the output δs of each
//! point, rows padded to an odd stride (or, for the lined passes, hidden rows
//! to a [`line_stride`]).

use crate::engine::fused::gpu::kernels::layers::{hidden_rows, stride};
use crate::engine::fused::gpu::kernels::lined::{line_stride, CHUNK, LINE};
use crate::engine::fused::gpu::kernels::ops::{cubes_by_shared, DRIVER_SHARED_PER_CUBE};
use crate::engine::fused::gpu::shape::Shape;

/// Largest tile: past it, bigger tiles only add idle tail work.
pub const MAX_TILE: usize = 128;

/// Shared memory the tiled kernel takes of a device with less than twice
/// this per cube: all of it up to this (the WebGPU floor of 16 KiB at least).
pub const TILE_SHARED_BYTES: usize = 48 * 1024;

/// Shared memory every WebGPU device has per workgroup, in bytes.
const WEBGPU_SHARED_BYTES: usize = 16 * 1024;

/// Values the cube sum of the loss needs in shared memory.
pub const LOSS_SCRATCH: usize = 256;

/// Shared-memory values one point of a tile needs: inputs, every hidden
/// layer's rows, output deltas (each row padded to an odd stride, or hidden
/// rows to a [`line_stride`] where `lined`).
pub fn tile_values(s: &Shape, lined: bool) -> usize {
    stride(s.inputs)
        + hidden_rows(s.act) * s.layers * hidden_stride(s.hidden, lined)
        + stride(s.outputs)
}

/// Row stride of a hidden layer's rows in the tile buffer.
pub fn hidden_stride(hidden: usize, lined: bool) -> usize {
    if lined {
        line_stride(hidden)
    } else {
        stride(hidden)
    }
}

/// Offset of hidden layer 1's rows in the tile buffer: after the inputs,
/// rounded up to a [`LINE`] (so lined rows start on 16 bytes).
pub fn first_rows(tile: usize, inputs: usize) -> usize {
    (tile * stride(inputs)).next_multiple_of(LINE)
}

/// Points a tile needs for the layer passes' full register blocks (4 or 8
/// points, `gpu/tiled_plan/`); fewer take blocks of 2 (more loads a
/// multiply-add, but a block for every unit).
pub const FULL_BLOCKS: usize = 32;

/// Shared-memory bytes a cube of `s`'s model takes on a device with
/// `max_shared` bytes per cube (one value a load): up to
/// [`TILE_SHARED_BYTES`]; where that holds fewer than [`FULL_BLOCKS`] points
/// (wide deep models: 23 at 4 × 128) and half the device's is more (CUDA's
/// opt-in 227 KiB), that half — two cubes a multiprocessor, tiles 2.4×
/// larger (4 × 128 on the H200: 4.38 → 3.15 s per 100 steps; 3 × 64's
/// 61-point tiles were faster than 128-point ones, docs/PERFORMANCE.md).
pub fn tile_budget(s: &Shape, max_shared: usize) -> usize {
    let base = max_shared.clamp(WEBGPU_SHARED_BYTES, TILE_SHARED_BYTES);
    if points(s, base, false) < FULL_BLOCKS {
        base.max((max_shared / 2).saturating_sub(DRIVER_SHARED_PER_CUBE))
    } else {
        base
    }
}

/// Points a tile of `bytes` holds (before the clamp to 1 ..= [`MAX_TILE`]).
fn points(s: &Shape, bytes: usize, lined: bool) -> usize {
    (bytes / 4).saturating_sub(LOSS_SCRATCH + LINE) / tile_values(s, lined)
}

/// Points a tile holds on a device with `max_shared` bytes of shared memory
/// per cube (at least 1: the widest model of the envelope needs 9.4 KiB for
/// one point). Lined tiles (CUDA) take a quarter of the device's where that
/// holds a plane's chunk of 64 points — four cubes a multiprocessor, whole
/// chunks (64 points at 3 × 64) — else all of it, one cube a multiprocessor
/// (108 points at 4 × 128; 107 ran 1.81 → 1.19 s against two cubes of 53,
/// docs/PERFORMANCE.md, "Lined passes").
pub fn tile_points(s: &Shape, max_shared: usize, lined: bool) -> usize {
    if !lined {
        return points(s, tile_budget(s, max_shared), false).clamp(1, MAX_TILE);
    }
    let base = max_shared.clamp(WEBGPU_SHARED_BYTES, TILE_SHARED_BYTES);
    let share =
        |cubes: usize| base.max((max_shared / cubes).saturating_sub(DRIVER_SHARED_PER_CUBE));
    let quarter = points(s, share(4), true).min(MAX_TILE);
    if quarter >= CHUNK {
        quarter - quarter % CHUNK
    } else {
        points(s, share(1), true).clamp(1, MAX_TILE)
    }
}

/// Cubes of the tiled kernel with tiles of `tile` points that one
/// multiprocessor of `per_sm_shared` bytes holds by shared memory (the driver
/// keeps 1 KiB a cube), at least 1.
pub fn resident_cubes(s: &Shape, tile: usize, per_sm_shared: usize, lined: bool) -> usize {
    cubes_by_shared(tile_bytes(s, tile, lined), per_sm_shared).max(1)
}

/// Shared-memory bytes of a cube with tiles of `tile` points.
pub fn tile_bytes(s: &Shape, tile: usize, lined: bool) -> usize {
    (tile * tile_values(s, lined) + LINE + LOSS_SCRATCH) * 4
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fused::envelope::{MAX_HIDDEN, MAX_IO, MAX_LAYERS};

    use crate::config::Activation;

    fn shape(io: usize, hidden: usize, layers: usize, act: Activation) -> Shape {
        Shape::mse_sgd((io, io), hidden, layers, act)
    }

    /// gelu keeps z and a: the widest rows.
    const GELU: Activation = Activation::Gelu;
    const RELU: Activation = Activation::Relu;

    #[test]
    fn the_widest_model_fits_a_point_in_the_smallest_shared_memory() {
        let per = tile_values(&shape(MAX_IO, MAX_HIDDEN, MAX_LAYERS, GELU), false);
        assert!(LOSS_SCRATCH + LINE + per <= WEBGPU_SHARED_BYTES / 4);
        let relu = tile_values(&shape(MAX_IO, MAX_HIDDEN, MAX_LAYERS, RELU), false);
        assert!(relu < per, "relu keeps one row a hidden layer");
        assert_eq!(
            tile_points(&shape(MAX_IO, MAX_HIDDEN, MAX_LAYERS, GELU), 0, false),
            (WEBGPU_SHARED_BYTES / 4 - LOSS_SCRATCH - LINE) / per
        );
    }

    #[test]
    fn small_models_take_the_largest_tile() {
        assert_eq!(
            tile_points(&shape(1, 10, 2, RELU), 1 << 20, false),
            MAX_TILE
        );
        assert!(tile_points(&shape(1, 64, 3, GELU), 48 * 1024, false) < MAX_TILE);
    }

    use crate::engine::fused::gpu::limits::SM90_SHARED as H200;

    #[test]
    fn wide_models_take_half_a_large_shared_memory_for_tiles_of_full_blocks() {
        let (wide, deep) = (shape(1, 128, 4, RELU), shape(1, 64, 3, RELU));
        // 4 × 128: 23 points in 48 KiB; half of CUDA's 227 KiB where it has it.
        assert_eq!(tile_budget(&wide, 48 * 1024), 48 * 1024);
        assert_eq!(tile_budget(&wide, 64 * 1024), 48 * 1024);
        assert_eq!(tile_budget(&wide, H200), H200 / 2 - 1024);
        assert_eq!(tile_points(&wide, 48 * 1024, false), 23);
        assert_eq!(tile_points(&wide, H200, false), 55);
        assert_eq!(resident_cubes(&wide, 55, H200, false), 2);
        // 3 × 64 fills its blocks in 48 KiB: 61 points, four cubes a multiprocessor.
        assert_eq!(tile_budget(&deep, H200), 48 * 1024);
        assert_eq!(tile_points(&deep, H200, false), 61);
        assert_eq!(resident_cubes(&deep, 61, H200, false), 4);
        assert_eq!(tile_budget(&deep, 32 * 1024), 32 * 1024);
        assert_eq!(resident_cubes(&wide, 23, 48 * 1024, false), 1);
    }

    #[test]
    fn lined_tiles_take_whole_chunks_and_keep_their_cubes_resident() {
        let (wide, deep) = (shape(1, 128, 4, RELU), shape(1, 64, 3, RELU));
        // 3 × 64: a quarter of 227 KiB holds 68 points, 64 of them taken.
        assert_eq!(tile_points(&deep, H200, true), 64);
        assert_eq!(resident_cubes(&deep, 64, H200, true), 4);
        // 4 × 128: a quarter holds fewer than a chunk; all of it, 108 points.
        assert_eq!(tile_points(&wide, H200, true), 108);
        assert_eq!(resident_cubes(&wide, 108, H200, true), 1);
        // Every lined row starts on 16 bytes.
        assert_eq!(hidden_stride(64, true) % LINE, 0);
        assert_eq!(first_rows(61, 1) % LINE, 0);
    }
}
