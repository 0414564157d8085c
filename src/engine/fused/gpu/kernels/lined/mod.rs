//! The tiled kernel's layer passes with 16-byte loads, for hidden layers of
//! a multiple of [`LINE`] units on CUDA (the scalar passes are
//! [`crate::engine::fused::gpu::kernels::layers`]).
//!
//! Shared memory serves a plane one 128-byte wavefront a cycle, and the
//! scalar passes spend a wavefront on every value a lane loads: one point's
//! value for each of a block's points, one weight for each of its units, for
//! ≈ 2.7 multiply-adds a wavefront where the multiprocessor does four times
//! as many multiply-adds a cycle as it reads wavefronts. Here a lane loads
//! four values of a row at a time (a [`LINE`]), and a plane's lanes form a
//! grid — 8 lanes of points × 4 lanes of units (forward, δ) or of inputs
//! (weight gradients) — so the lanes of one side read the same line: 12
//! loads for 128 multiply-adds. Rows are [`line_stride`] values apart (4 ×
//! an odd number), so the 8 points of a load fall in 8 different groups of
//! banks. Measured since (docs/PERFORMANCE.md, "The f32 bar"): the H200
//! serves a 16-byte load a quarter plane at a time, ~3.8 L1 wavefronts a
//! request, so the lines save instructions more than wavefronts.
//!
//! Loads go through views with a vector size, which CubeCL compiles only in
//! unchecked launches, not to WGSL, and to SPIR-V wrongly (a line stored into
//! a float, refused by lavapipe): the engine takes this path only on CUDA
//! without bounds checks.
//!
//! `products`: a hidden layer's products going forward and the output
//! layer's dot products; `gradients`: going backward, the weight and bias
//! gradients and the δ of the layer below.

mod gradients;
mod products;

pub use gradients::backward;
pub use products::{dense, forward};

use cubecl::prelude::*;

/// Values a load takes: four f32s, 16 bytes.
pub const LINE: usize = 4;

/// Lanes of a plane along the points of a block grid.
const POINT_LANES: usize = 8;

/// Lanes of a plane along its units (forward), inputs (δ) or units (weight
/// gradients): a plane is [`POINT_LANES`] × this.
const SIDE_LANES: usize = 4;

/// Units a plane of lanes makes.
const PLANE: usize = POINT_LANES * SIDE_LANES;

/// Most points a lane takes (`Blocks::points`).
pub const MAX_POINTS: usize = 8;

/// Points of a plane's blocks of [`MAX_POINTS`] points: the chunk lined tiles
/// are counted in.
pub const CHUNK: usize = POINT_LANES * MAX_POINTS;

/// Points a lane takes of a tile of `tile` points: as few as cover the tile
/// in the fewest chunks (7 for 108 points: two chunks of 56).
pub fn lane_points(tile: usize) -> usize {
    tile.div_ceil(POINT_LANES * tile.div_ceil(CHUNK))
}

/// Lane items of a forward or δ pass over a tile of `tile` points, `points`
/// a lane, and `width` units (or inputs): a plane of lanes for each chunk of
/// the tile's points and each [`SIDE_LANES`] lines of the width.
pub fn block_items(tile: usize, points: usize, width: usize) -> usize {
    tile.div_ceil(POINT_LANES * points) * width.div_ceil(SIDE_LANES * LINE) * PLANE
}

/// Lane items of a weight-gradient pass of `in_w` inputs and `out_w` units,
/// blocks of `gu` units × `gq` lines of inputs: a plane for each
/// [`POINT_LANES`] × `gq` lines and each [`SIDE_LANES`] × `gu` units.
pub fn grad_items(in_w: usize, out_w: usize, gu: usize, gq: usize) -> usize {
    (in_w / LINE).div_ceil(POINT_LANES * gq) * out_w.div_ceil(SIDE_LANES * gu) * PLANE
}

/// Row stride of a lined layer `width` wide (a multiple of [`LINE`]): four
/// times an odd number, so rows of neighbouring points start in different
/// groups of four banks.
pub fn line_stride(width: usize) -> usize {
    LINE * (width.div_ceil(LINE) | 1)
}

/// Whether rows `width` wide, `stride` apart, are read a line at a time
/// (hidden rows; the output δs' odd stride is not).
fn lined_rows(width: usize, stride: usize) -> bool {
    width.is_multiple_of(LINE) && stride.is_multiple_of(LINE)
}

/// Whether a model of hidden layers `hidden` wide can take the lined passes.
pub fn fits(hidden: usize) -> bool {
    hidden.is_multiple_of(LINE)
}

/// Four rows' lines of weights into `dst`: `lines[first + i · step]` for
/// i < 4 (step: the lines of a row).
#[cube]
fn weight_lines<F: Float>(
    lines: &Slice<Vector<F, Const<4>>>,
    dst: &mut Array<F>,
    first: usize,
    step: usize,
) {
    #[unroll]
    for i in 0..LINE {
        let l = lines[first + i * step];
        #[unroll]
        for e in 0..LINE {
            dst[i * LINE + e] = l[e];
        }
    }
}
