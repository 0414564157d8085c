//! Device functions shared by the fused GPU kernels ([`crate::engine::fused::gpu::kernels::fused`],
//! [`crate::engine::fused::gpu::kernels::persistent`]): a cube's gradient row and the cube-wide
//! reductions (the per-point pass is in [`crate::engine::fused::gpu::kernels::point`], pointwise
//! math in [`crate::engine::fused::gpu::kernels::math`]). One definition each, so the two-launch
//! and the persistent kernels cannot drift apart.

use crate::engine::fused::gpu::kernels::args::{Points, Walk};
use crate::engine::fused::gpu::kernels::point::point_pass;
use crate::engine::fused::gpu::kernels::split::split_gradient;
use crate::engine::fused::gpu::shape::{Pass, Shape};
use cubecl::prelude::*;

/// Units per cube of the fused kernels (a power of two, for the tree reductions).
pub const CUBE_UNITS: u32 = 256;

/// Shared memory a driver keeps for each resident cube, in bytes (CUDA: 1 KiB).
pub const DRIVER_SHARED_PER_CUBE: usize = 1024;

/// Cubes taking `bytes` of shared memory each that one multiprocessor of
/// `per_sm_shared` bytes holds at once (0 when not one fits).
pub fn cubes_by_shared(bytes: usize, per_sm_shared: usize) -> usize {
    per_sm_shared / (bytes + DRIVER_SHARED_PER_CUBE)
}
/// Most columns of a gradient row that [`cube_rows`] sums together without
/// plane operations (a power of two, at most [`CUBE_UNITS`]): 17 KiB of
/// shared memory with their shares, where a software device (lavapipe) has 32.
pub const COLUMNS: usize = 16;

/// Columns [`cube_rows`] sums together without plane operations for a row
/// of `width` values: a power of two, so its units split evenly into shares.
fn chunk_columns(width: usize) -> usize {
    width.next_power_of_two().min(COLUMNS)
}
/// Whether the fused kernels reduce with plane sums on a device whose
/// smallest plane (warp, subgroup) has `plane_min` units: they need plane
/// operations and planes of at least 4 (a known, bounded number per cube).
pub fn use_planes(has_plane_ops: bool, plane_min: u32) -> bool {
    has_plane_ops && plane_min >= 4 && plane_min.is_power_of_two()
}

/// Shared-memory scratch that [`cube_rows`] and [`cube_sum`] need for a
/// gradient row of `width` values: one row per plane (per `scatter` lanes,
/// padded to whole chunks of them, with the reduce-scatter), or [`COLUMNS`]
/// units' rows and their shares.
pub fn scratch_len(width: usize, plane: bool, plane_min: u32, scatter: usize) -> usize {
    if scatter > 0 {
        CUBE_UNITS as usize * width.div_ceil(scatter)
    } else if plane {
        (CUBE_UNITS / plane_min) as usize * width
    } else {
        // The columns' values, then their shares; at least one value a unit
        // (`cube_sum`).
        (chunk_columns(width) + 1) * CUBE_UNITS as usize
    }
}

/// How a pass of `lanes` units a point reduces a gradient row of `width`
/// values on a device whose smallest plane has `plane_min` units (plane
/// operations when `plane`): the reduce-scatter's lanes ([`cube_rows`]; 0
/// for none) and the shared scratch, in values. The engine and
/// `kernel_source` both take it, so the kernel shown is the kernel run.
pub fn row_reduction(width: usize, plane: bool, plane_min: u32, lanes: usize) -> (usize, usize) {
    // One unit a point: a reduce-scatter in groups of at most 32 lanes
    // (valid in any wider plane: the shuffles stay in their group; a 64-lane
    // group would pad a 32-value row).
    let scatter = if plane && lanes == 1 {
        plane_min.min(32) as usize
    } else {
        0
    };
    // Split passes reduce in their own way; cube sums need one value per plane.
    let rows = if lanes > 1 { 1 } else { width };
    (scatter, scratch_len(rows, plane, plane_min, scatter))
}

/// Sums every unit's `acc` (times `scale`) over the cube into `row[0..width]`.
/// With `scatter` lanes (a power of two, at most 32): a reduce-scatter within
/// each group of that many lanes of a plane — for each chunk of `scatter`
/// values, lane `k` ends with the group's sum of value `k` after
/// `scatter - 1` shuffles, where a plane sum takes log2(lanes) a value —
/// then one pass over the groups. With `plane`: a plane sum per value, then
/// one pass over the planes. Else through shared memory, [`COLUMNS`] values
/// at a time. Every order is fixed, so the result is deterministic. `red` holds
/// [`scratch_len`] values.
#[cube]
pub fn cube_rows<F: Float>(
    acc: &Array<F>,
    scale: F,
    red: &mut SharedMemory<F>,
    row: &mut SharedMemory<F>,
    #[comptime] width: usize,
    #[comptime] plane: bool,
    #[comptime] scatter: usize,
) {
    let unit = UNIT_POS as usize;
    if comptime!(scatter > 0) {
        let chunks = comptime!(width.div_ceil(scatter));
        let padded = comptime!(chunks * scatter);
        let lane = unit % scatter;
        let group = unit / scatter;
        #[unroll]
        for c in 0..chunks {
            let mut v = Array::<F>::new(scatter);
            #[unroll]
            for k in 0..scatter {
                let j = c * scatter + k;
                if j < width {
                    v[k] = acc[j] * scale;
                } else {
                    v[k] = F::new(0.0);
                }
            }
            // Halve the values each level: the lane whose bit is set keeps
            // the upper half and sends the lower.
            if comptime!(scatter > 16) {
                scatter_level::<F>(&mut v, lane, 16usize, 16usize);
            }
            if comptime!(scatter > 8) {
                scatter_level::<F>(&mut v, lane, 8usize, 8usize);
            }
            if comptime!(scatter > 4) {
                scatter_level::<F>(&mut v, lane, 4usize, 4usize);
            }
            if comptime!(scatter > 2) {
                scatter_level::<F>(&mut v, lane, 2usize, 2usize);
            }
            scatter_level::<F>(&mut v, lane, 1usize, 1usize);
            red[group * padded + c * scatter + lane] = v[0];
        }
        sync_cube();
        let groups = CUBE_DIM as usize / scatter;
        let mut j = unit;
        while j < width {
            let mut s = F::new(0.0);
            for g in 0..groups {
                s += red[g * padded + j];
            }
            row[j] = s;
            j += CUBE_DIM as usize;
        }
        sync_cube();
    } else if plane {
        let planes = (CUBE_DIM / PLANE_DIM) as usize;
        let pid = (UNIT_POS / PLANE_DIM) as usize;
        #[unroll]
        for j in 0..width {
            let s = plane_sum(acc[j] * scale);
            if UNIT_POS_PLANE == 0u32 {
                red[pid * width + j] = s;
            }
        }
        sync_cube();
        let mut j = unit;
        while j < width {
            let mut s = F::new(0.0);
            for p in 0..planes {
                s += red[p * width + j];
            }
            row[j] = s;
            j += CUBE_DIM as usize;
        }
        sync_cube();
    } else {
        // No plane operations: a chunk of columns at a time, every unit's
        // values into shared memory, then `parts` units a column add a
        // share of them, then one unit a column adds the shares. Three
        // barriers a chunk and none in a loop: a software device
        // (lavapipe) turns every barrier into a suspension point of a
        // coroutine holding the unit's whole row, which took its compiler
        // minutes per kernel with a barrier for each level of a tree.
        let units = CUBE_UNITS as usize;
        let cols = comptime!(chunk_columns(width));
        // `cols` divides the cube's units: share q of column r is units
        // q, q + parts, … (`cols` of them), and every unit is in one share.
        let parts = comptime!(CUBE_UNITS as usize / cols);
        let shares = cols * units;
        #[unroll]
        for c in 0..width.div_ceil(cols) {
            #[unroll]
            for r in 0..cols {
                let j = c * cols + r;
                if j < width {
                    red[r * units + unit] = acc[j] * scale;
                }
            }
            sync_cube();
            let r = unit / parts;
            let q = unit % parts;
            let mut s = F::new(0.0);
            for k in 0..cols {
                s += red[r * units + q + k * parts];
            }
            red[shares + unit] = s;
            sync_cube();
            let j = c * cols + unit;
            if unit < cols && j < width {
                let mut s = F::new(0.0);
                for q in 0..parts {
                    s += red[shares + unit * parts + q];
                }
                row[j] = s;
            }
            sync_cube();
        }
    }
}

/// One level of a reduce-scatter over `2·half` values in `v[0..2·half]`
/// between the lanes `mask` apart: after it, `v[0..half]` holds this lane's
/// half (the upper one where bit `mask` of `lane` is set) plus the partner
/// lane's same half.
#[cube]
pub fn scatter_level<F: Float>(
    v: &mut Array<F>,
    lane: usize,
    #[comptime] half: usize,
    #[comptime] mask: usize,
) {
    let upper = (lane & mask) != 0;
    #[unroll]
    for i in 0..half {
        let lo = v[i];
        let hi = v[i + half];
        let got = plane_shuffle_xor(select(upper, lo, hi), mask as u32);
        v[i] = select(upper, hi, lo) + got;
    }
}

/// The sum of `value` over the cube's units, valid in unit 0 (fixed order).
#[cube]
pub fn cube_sum<F: Float>(value: F, red: &mut SharedMemory<F>, #[comptime] plane: bool) -> F {
    let unit = UNIT_POS as usize;
    let mut total = F::new(0.0);
    if plane {
        let planes = (CUBE_DIM / PLANE_DIM) as usize;
        let s = plane_sum(value);
        if UNIT_POS_PLANE == 0u32 {
            red[(UNIT_POS / PLANE_DIM) as usize] = s;
        }
        sync_cube();
        if unit == 0usize {
            for p in 0..planes {
                total += red[p];
            }
        }
    } else {
        red[unit] = value;
        sync_cube();
        let mut half = (CUBE_DIM / 2u32) as usize;
        while half > 0usize {
            if unit < half {
                let other = red[unit + half];
                red[unit] += other;
            }
            sync_cube();
            half /= 2usize;
        }
        total = red[0];
    }
    sync_cube();
    total
}

/// The cube's gradient (times `walk.scale`) of the points of `walk`, into
/// `row[0..np + 1]`: one unit per point ([`point_pass`], [`cube_rows`]) when
/// `lanes` is 1, else `lanes` units per point ([`split_gradient`]). Both
/// kernels call this, so they agree.
#[cube]
pub fn cube_gradient<F: Float>(
    points: &Points<F>,
    w: &SharedMemory<F>,
    red: &mut SharedMemory<F>,
    row: &mut SharedMemory<F>,
    walk: &Walk<F>,
    #[comptime] shape: Shape,
    #[comptime] pass: Pass,
) {
    let plane = comptime!(pass.plane);
    let lanes = comptime!(pass.lanes);
    if lanes > 1 {
        split_gradient::<F>(points, w, row, walk, shape, pass);
    } else {
        let width = comptime!(shape.params() + 1);
        let mut acc = Array::<F>::new(width);
        #[unroll]
        for j in 0..width {
            acc[j] = F::new(0.0);
        }
        point_pass::<F>(points, w, &mut acc, walk, shape, pass);
        cube_rows::<F>(
            &acc,
            walk.scale,
            red,
            row,
            width,
            plane,
            comptime!(pass.scatter),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_falls_in_one_share_of_a_chunk() {
        for width in 1..=200 {
            let cols = chunk_columns(width);
            let parts = CUBE_UNITS as usize / cols;
            let share = CUBE_UNITS as usize / parts;
            // Share q of a column takes units q, q + parts, …: all of them once.
            assert_eq!(parts * share, CUBE_UNITS as usize, "width {width}");
            // The chunk's values and the shares fit the scratch.
            let need = (cols + 1) * CUBE_UNITS as usize;
            assert!(need <= scratch_len(width, false, 0, 0), "width {width}");
        }
    }
}
