//! Device functions shared by the fused GPU kernels ([`crate::engine::fused::gpu::kernels::fused`],
//! [`crate::engine::fused::gpu::kernels::persistent`]): the per-point forward+backward pass and the
//! cube-wide reductions (pointwise math is in [`crate::engine::fused::gpu::kernels::math`]). One
//! definition each, so the two-launch and the persistent kernels cannot drift
//! apart.

use crate::engine::fused::gpu::kernels::args::{Points, Walk};
use crate::engine::fused::gpu::kernels::math::{act_bwd, act_fwd, loss_grad, loss_value};
use crate::engine::fused::gpu::kernels::split::split_gradient;
use crate::engine::fused::gpu::shape::{Pass, Shape};
use cubecl::prelude::*;

/// Units per cube of the fused kernels (a power of two, for the tree reductions).
pub const CUBE_UNITS: u32 = 256;

/// Shared memory a driver keeps for each resident cube, in bytes (CUDA: 1 KiB).
const DRIVER_SHARED_PER_CUBE: usize = 1024;

/// Cubes taking `bytes` of shared memory each that one multiprocessor of
/// `per_sm_shared` bytes holds at once (0 when not one fits).
pub fn cubes_by_shared(bytes: usize, per_sm_shared: usize) -> usize {
    per_sm_shared / (bytes + DRIVER_SHARED_PER_CUBE)
}
/// Accumulators reduced together per round of the shared-memory tree reduction.
pub const ROWS: usize = 8;
/// Whether the fused kernels reduce with plane sums on a device whose
/// smallest plane (warp, subgroup) has `plane_min` units: they need plane
/// operations and planes of at least 4 (a known, bounded number per cube).
pub fn use_planes(has_plane_ops: bool, plane_min: u32) -> bool {
    has_plane_ops && plane_min >= 4 && plane_min.is_power_of_two()
}

/// Shared-memory scratch that [`cube_rows`] and [`cube_sum`] need for a
/// gradient row of `width` values: one row per plane, or the tree's rows.
pub fn scratch_len(width: usize, plane: bool, plane_min: u32) -> usize {
    if plane {
        (CUBE_UNITS / plane_min) as usize * width
    } else {
        ROWS * CUBE_UNITS as usize
    }
}

/// Largest parameter count whose weights the point pass copies to registers
/// (past it they stay in shared memory: copies would spill).
pub const REGISTER_WEIGHTS: usize = 64;

/// Weight `i`: from the register copy `wr` when `regs`, else from shared `w`.
#[cube]
fn weight<F: Float>(w: &SharedMemory<F>, wr: &Array<F>, i: usize, #[comptime] regs: bool) -> F {
    if regs {
        wr[i]
    } else {
        w[i]
    }
}

/// z_j = b1_j + Σ_a w1[j, a]·x_a for hidden unit `j` (weights in shared memory).
#[cube]
pub fn pre_activation<F: Float>(
    w: &SharedMemory<F>,
    wr: &Array<F>,
    xs: &Array<F>,
    j: usize,
    #[comptime] inputs: usize,
    #[comptime] ob1: usize,
    #[comptime] regs: bool,
) -> F {
    let mut z = weight::<F>(w, wr, ob1 + j, regs);
    #[unroll]
    for a in 0..inputs {
        z += weight::<F>(w, wr, j * inputs + a, regs) * xs[a];
    }
    z
}

/// Points whose inputs a unit loads together before computing any of them on
/// a GPU (more loads in flight per thread: the pass is latency-bound at large
/// N). Software devices (lavapipe) use 1: they gain nothing, and compiling
/// the unrolled code takes their LLVM minutes at 64 hidden units.
pub const LOAD_AHEAD: usize = 4;

/// Forward, loss and backward for the points of `walk`, adding the gradient
/// and loss of each into `acc` (`acc[np]` is the loss). Parameters in `w` are
/// laid out like `Params::flatten`: `[w1 (H x I) | b1 (H) | w2 (O x H) | b2 (O)]`.
#[cube]
pub fn point_pass<F: Float>(
    points: &Points<F>,
    w: &SharedMemory<F>,
    acc: &mut Array<F>,
    walk: &Walk<F>,
    #[comptime] shape: Shape,
    #[comptime] pass: Pass,
) {
    let inputs = comptime!(shape.inputs);
    let outputs = comptime!(shape.outputs);
    let use_idx = comptime!(pass.use_idx);
    let ahead = comptime!(pass.ahead);
    // Small models' weights move to registers once per pass: every point
    // reads each of them twice, and shared-memory loads would outnumber the
    // arithmetic. Wide ones stay in shared memory (copies would spill).
    let np = comptime!(shape.params());
    let mut wr = Array::<F>::new(np);
    if comptime!(in_registers(&shape)) {
        #[unroll]
        for k in 0..np {
            wr[k] = w[k];
        }
    }
    let mut xk = Array::<F>::new(ahead * inputs);
    let mut yk = Array::<F>::new(ahead * outputs);
    let n = walk.count as usize;
    let stride = walk.stride;
    let mut i = walk.first;
    // Whole groups of `ahead` points: every load first, then the arithmetic.
    while i + (ahead - 1usize) * stride < n {
        #[unroll]
        for u in 0..ahead {
            let p = points.at(walk.start, i + u * stride, use_idx);
            #[unroll]
            for a in 0..inputs {
                xk[u * inputs + a] = points.x[p * inputs + a];
            }
            #[unroll]
            for o in 0..outputs {
                yk[u * outputs + o] = points.y[p * outputs + o];
            }
        }
        #[unroll]
        for u in 0..ahead {
            point_grad::<F>(&xk, &yk, u, w, &wr, acc, shape);
        }
        i += ahead * stride;
    }
    // The remaining points, one at a time (none when loading one at a time).
    if ahead > 1 {
        while i < n {
            let p = points.at(walk.start, i, use_idx);
            points.load(&mut xk, &mut yk, p, inputs, outputs);
            point_grad::<F>(&xk, &yk, 0usize, w, &wr, acc, shape);
            i += stride;
        }
    }
}

/// Whether the point pass copies the weights to registers.
fn in_registers(shape: &Shape) -> bool {
    shape.params() <= REGISTER_WEIGHTS
}

/// Forward, loss and backward of point `u` of `xk`/`yk`, added into `acc`
/// (weights from the register copy `wr` when they are in registers, else `w`).
#[cube]
fn point_grad<F: Float>(
    xk: &Array<F>,
    yk: &Array<F>,
    #[comptime] u: usize,
    w: &SharedMemory<F>,
    wr: &Array<F>,
    acc: &mut Array<F>,
    #[comptime] shape: Shape,
) {
    let inputs = comptime!(shape.inputs);
    let hidden = comptime!(shape.hidden);
    let outputs = comptime!(shape.outputs);
    let act = comptime!(shape.act);
    let loss = comptime!(shape.loss);
    let regs = comptime!(in_registers(&shape));
    let ob1 = hidden * inputs;
    let ow2 = ob1 + hidden;
    let ob2 = ow2 + outputs * hidden;
    let np = ob2 + outputs;
    let mut xs = Array::<F>::new(inputs);
    let mut outs = Array::<F>::new(outputs);
    let mut ds = Array::<F>::new(outputs);
    #[unroll]
    for a in 0..inputs {
        xs[a] = xk[u * inputs + a];
    }
    #[unroll]
    for o in 0..outputs {
        outs[o] = weight::<F>(w, wr, ob2 + o, regs);
    }
    #[unroll]
    for j in 0..hidden {
        let aj = act_fwd::<F>(pre_activation::<F>(w, wr, &xs, j, inputs, ob1, regs), act);
        #[unroll]
        for o in 0..outputs {
            outs[o] += weight::<F>(w, wr, ow2 + o * hidden + j, regs) * aj;
        }
    }
    #[unroll]
    for o in 0..outputs {
        let r = outs[o] - yk[u * outputs + o];
        acc[np] += loss_value::<F>(r, loss);
        let d = loss_grad::<F>(r, loss);
        ds[o] = d;
        acc[ob2 + o] += d;
    }
    #[unroll]
    for j in 0..hidden {
        // Recomputing z costs I multiply-adds; keeping H of them would cost registers.
        let zj = pre_activation::<F>(w, wr, &xs, j, inputs, ob1, regs);
        let aj = act_fwd::<F>(zj, act);
        let mut back = F::new(0.0);
        #[unroll]
        for o in 0..outputs {
            acc[ow2 + o * hidden + j] += ds[o] * aj;
            back += weight::<F>(w, wr, ow2 + o * hidden + j, regs) * ds[o];
        }
        let dz = back * act_bwd::<F>(zj, act);
        #[unroll]
        for a in 0..inputs {
            acc[j * inputs + a] += dz * xs[a];
        }
        acc[ob1 + j] += dz;
    }
}

/// Sums every unit's `acc` (times `scale`) over the cube into `row[0..width]`.
/// With `plane`, a plane sum per value then one pass over the planes; else a
/// shared-memory tree, [`ROWS`] values at a time. Both orders are fixed, so the
/// result is deterministic. `red` holds [`scratch_len`] values.
#[cube]
pub fn cube_rows<F: Float>(
    acc: &Array<F>,
    scale: F,
    red: &mut SharedMemory<F>,
    row: &mut SharedMemory<F>,
    #[comptime] width: usize,
    #[comptime] plane: bool,
) {
    let unit = UNIT_POS as usize;
    if plane {
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
        let units = CUBE_UNITS as usize;
        #[unroll]
        for c in 0..width.div_ceil(ROWS) {
            #[unroll]
            for r in 0..ROWS {
                let j = c * ROWS + r;
                if j < width {
                    red[r * units + unit] = acc[j] * scale;
                } else {
                    red[r * units + unit] = F::new(0.0);
                }
            }
            sync_cube();
            let mut half = (CUBE_DIM / 2u32) as usize;
            while half > 0usize {
                if unit < half {
                    for r in 0..ROWS {
                        let other = red[r * units + unit + half];
                        red[r * units + unit] += other;
                    }
                }
                sync_cube();
                half /= 2usize;
            }
            if unit < ROWS {
                let j = c * ROWS + unit;
                if j < width {
                    row[j] = red[unit * units];
                }
            }
            sync_cube();
        }
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
        cube_rows::<F>(&acc, walk.scale, red, row, width, plane);
    }
}
