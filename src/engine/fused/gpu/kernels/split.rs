//! Hidden units split across a plane's lanes: the fused pass for wide layers.
//!
//! With one unit per point ([`crate::engine::fused::gpu::kernels::point::point_pass`]) a unit keeps the
//! whole gradient row (np + 1 values) in registers; past ~100 parameters that
//! spills (CUDA took 126 ms for the seed job at 64 hidden units). Here `lanes`
//! consecutive units of one plane share each point: lane `k` owns hidden units
//! `k·U .. (k+1)·U` (U = ⌈hidden / lanes⌉; units past `hidden` are padding with
//! zero weights), their weights and their gradients. The output is summed over
//! the lanes with butterfly shuffles (or, on devices without plane operations
//! such as lavapipe, through shared memory between two barriers), so every
//! lane sees the loss gradient.
//!
//! The cube's reduction sums lanes with the same `k` across the plane (shuffles
//! with offsets `lanes`, `2·lanes`, …), then adds the planes (or, without
//! plane operations, the groups) into the shared gradient row one after
//! another — a fixed order, so deterministic.
//!
//! Loops are uniform across the cube (a point past the end counts zero), so
//! every lane of a plane reaches each shuffle together.

use crate::engine::fused::gpu::kernels::args::{Points, Walk};
use crate::engine::fused::gpu::kernels::math::{act_bwd, act_fwd, loss_grad, loss_value};
use crate::engine::fused::gpu::kernels::point::{fold_unit, output_sum_from_first, UnitSums};
use crate::engine::fused::gpu::shape::{Pass, Shape};
use cubecl::prelude::*;

/// Registers a lane may spend on its weights, accumulators and activations
/// before more lanes share a point: 16 hidden units a lane at one input and
/// output, the fastest share on the H200 at 64 and 128 units under CUDA and
/// Vulkan (docs/PERFORMANCE.md, "Wide layers"; `--lanes` overrides it).
pub const LANE_REGISTERS: usize = 130;

/// Registers a lane with `units` hidden units uses (weights, gradient, z and act(z)).
fn lane_cost(units: usize, inputs: usize, outputs: usize) -> usize {
    2 * units * (inputs + 1 + outputs) + 2 * units + outputs + 1
}

/// Lanes per point for one hidden layer of `hidden` units: the fewest (a power
/// of two, at most the device's smallest plane and 32) whose share fits in
/// [`LANE_REGISTERS`]. 1 means no split: a whole row fits in one unit (the
/// seed job).
pub fn split_lanes(
    inputs: usize,
    hidden: usize,
    outputs: usize,
    planes: bool,
    plane_min: u32,
) -> usize {
    let most = if planes {
        (plane_min as usize).min(32)
    } else {
        32
    };
    let mut lanes = 1;
    while lanes * 2 <= most
        && lanes < hidden
        && lane_cost(hidden.div_ceil(lanes), inputs, outputs) > LANE_REGISTERS
    {
        lanes *= 2;
    }
    lanes
}

/// The cube's gradient of the points of `walk` (times its scale) into
/// `row[0..np + 1]` (`row[np]` is the loss). A group of `lanes` units takes
/// each point: the groups start at `walk.first / lanes` with stride
/// `walk.stride / lanes` (`first` and `stride` count units, as in
/// [`crate::engine::fused::gpu::kernels::point::point_pass`]).
#[cube]
pub fn split_gradient<F: Float>(
    points: &Points<F>,
    w: &SharedMemory<F>,
    row: &mut SharedMemory<F>,
    walk: &Walk<F>,
    #[comptime] shape: Shape,
    #[comptime] pass: Pass,
) {
    let inputs = comptime!(shape.inputs);
    let hidden = comptime!(shape.hidden);
    let outputs = comptime!(shape.outputs);
    let act = comptime!(shape.act);
    let loss = comptime!(shape.loss);
    let use_idx = comptime!(pass.use_idx);
    let plane = comptime!(pass.plane);
    let lanes = comptime!(pass.lanes);
    let units = hidden.div_ceil(lanes);
    // With one output, the first layer's sums leave the output weight out
    // until the points are done, as in the point pass.
    let one_out = comptime!(outputs == 1);
    // Global layout (`Params::flatten`) and this lane's register layout.
    let ob1 = hidden * inputs;
    let ow2 = ob1 + hidden;
    let ob2 = ow2 + outputs * hidden;
    let np = ob2 + outputs;
    let lb1 = units * inputs;
    let lw2 = lb1 + units;
    let lb2 = lw2 + outputs * units;
    let lloss = lb2 + outputs;
    let k = UNIT_POS as usize % lanes;
    let lead_unit = UNIT_POS as usize - k;
    // The output exchange without plane operations (one value per unit).
    let mut xo = SharedMemory::<F>::new(comptime!(if plane { 1usize } else { 256usize }));
    let j0 = k * units;

    let mut wr = Array::<F>::new(lb2 + outputs);
    #[unroll]
    for u in 0..units {
        let j = j0 + u;
        let real = j < hidden;
        #[unroll]
        for a in 0..inputs {
            wr[u * inputs + a] = F::new(0.0);
            if real {
                wr[u * inputs + a] = w[j * inputs + a];
            }
        }
        wr[lb1 + u] = F::new(0.0);
        if real {
            wr[lb1 + u] = w[ob1 + j];
        }
        #[unroll]
        for o in 0..outputs {
            wr[lw2 + o * units + u] = F::new(0.0);
            if real {
                wr[lw2 + o * units + u] = w[ow2 + o * hidden + j];
            }
        }
    }
    #[unroll]
    for o in 0..outputs {
        wr[lb2 + o] = w[ob2 + o];
    }
    let mut acc = Array::<F>::new(lloss + 1);
    #[unroll]
    for q in 0..lloss + 1 {
        acc[q] = F::new(0.0);
    }

    let n = walk.count as usize;
    let groups = walk.stride / lanes;
    let mut i = walk.first / lanes;
    // The cube's first group: the loop runs while it has a point, so every unit
    // of the cube runs the same number of rounds.
    let mut lead = (walk.first - UNIT_POS as usize) / lanes;
    let mut zs = Array::<F>::new(units);
    let mut hs = Array::<F>::new(units);
    let mut outs = Array::<F>::new(outputs);
    let mut ds = Array::<F>::new(outputs);
    // The next point's inputs and targets load while this one computes.
    let mut xs = Array::<F>::new(inputs);
    let mut ys = Array::<F>::new(outputs);
    let mut xn = Array::<F>::new(inputs);
    let mut yn = Array::<F>::new(outputs);
    let p = points.at(walk.start, in_batch(i, n), use_idx);
    points.load(&mut xs, &mut ys, p, 0usize, inputs, outputs);
    while lead < n {
        let valid = i < n;
        let p = points.at(walk.start, in_batch(i + groups, n), use_idx);
        points.load(&mut xn, &mut yn, p, 0usize, inputs, outputs);
        #[unroll]
        for o in 0..outputs {
            outs[o] = F::new(0.0);
        }
        #[unroll]
        for u in 0..units {
            let mut z = wr[lb1 + u];
            #[unroll]
            for a in 0..inputs {
                z += wr[u * inputs + a] * xs[a];
            }
            let h = act_fwd::<F>(z, act);
            zs[u] = z;
            hs[u] = h;
            #[unroll]
            for o in 0..outputs {
                outs[o] += wr[lw2 + o * units + u] * h;
            }
        }
        #[unroll]
        for o in 0..outputs {
            let mut s = outs[o];
            if plane {
                let mut off = 1u32;
                while (off as usize) < lanes {
                    s += plane_shuffle_xor(s, off);
                    off *= 2u32;
                }
            } else {
                // Through shared memory: every lane sums its group in the same order.
                sync_cube();
                xo[UNIT_POS as usize] = s;
                sync_cube();
                s = F::new(0.0);
                #[unroll]
                for l in 0..lanes {
                    s += xo[lead_unit + l];
                }
            }
            let r = s + wr[lb2 + o] - ys[o];
            let mut d = F::new(0.0);
            let mut l = F::new(0.0);
            if valid {
                d = loss_grad::<F>(r, loss);
                l = loss_value::<F>(r, loss);
            }
            ds[o] = d;
            acc[lb2 + o] += d;
            acc[lloss] += l;
        }
        #[unroll]
        for u in 0..units {
            let mut back = F::new(0.0);
            if comptime!(one_out) {
                // The output weight is folded in after the points.
                back = ds[0];
                if comptime!(!output_sum_from_first(act)) {
                    acc[lw2 + u] += ds[0] * hs[u];
                }
            } else {
                #[unroll]
                for o in 0..outputs {
                    acc[lw2 + o * units + u] += ds[o] * hs[u];
                    back += wr[lw2 + o * units + u] * ds[o];
                }
            }
            let dz = back * act_bwd::<F>(zs[u], act);
            #[unroll]
            for a in 0..inputs {
                acc[u * inputs + a] += dz * xs[a];
            }
            acc[lb1 + u] += dz;
        }
        #[unroll]
        for a in 0..inputs {
            xs[a] = xn[a];
        }
        #[unroll]
        for o in 0..outputs {
            ys[o] = yn[o];
        }
        i += groups;
        lead += groups;
    }

    if comptime!(one_out) {
        // As the point pass does (`point::fold_output_weight`).
        #[unroll]
        for u in 0..units {
            let mut w1 = Array::<F>::new(inputs);
            #[unroll]
            for a in 0..inputs {
                w1[a] = wr[u * inputs + a];
            }
            let at = UnitSums {
                w1: u * inputs,
                b1: lb1 + u,
                w2: lw2 + u,
            };
            fold_unit::<F>(&mut acc, &w1, wr[lb1 + u], wr[lw2 + u], at, inputs, act);
        }
    }
    // Lanes with the same k across the plane: butterfly over offsets >= lanes.
    #[unroll]
    for q in 0..lloss + 1 {
        let mut s = acc[q];
        if plane {
            let mut off = 1u32;
            while off < PLANE_DIM {
                if (off as usize) >= lanes {
                    s += plane_shuffle_xor(s, off);
                }
                off *= 2u32;
            }
        }
        acc[q] = s * walk.scale;
    }
    let t = UNIT_POS as usize;
    let mut c = t;
    while c < np + 1 {
        row[c] = F::new(0.0);
        c += CUBE_DIM as usize;
    }
    sync_cube();
    // Teams one after another (a plane, already summed; or a group of lanes):
    // the team's lanes k < lanes add their units.
    let mut team = PLANE_DIM;
    if !plane {
        // `lanes` as a runtime value (it is a compile-time one).
        team = team - PLANE_DIM + lanes as u32;
    }
    let lane = (UNIT_POS % team) as usize;
    let tid = UNIT_POS / team;
    for turn in 0..CUBE_DIM / team {
        if tid == turn && lane < lanes {
            #[unroll]
            for u in 0..units {
                let j = j0 + u;
                if j < hidden {
                    #[unroll]
                    for a in 0..inputs {
                        row[j * inputs + a] += acc[u * inputs + a];
                    }
                    row[ob1 + j] += acc[lb1 + u];
                    #[unroll]
                    for o in 0..outputs {
                        row[ow2 + o * hidden + j] += acc[lw2 + o * units + u];
                    }
                }
            }
            if lane == 0usize {
                #[unroll]
                for o in 0..outputs {
                    row[ob2 + o] += acc[lb2 + o];
                }
                row[np] += acc[lloss];
            }
        }
        sync_cube();
    }
}

/// `i` when it is a point of a micro-batch of `n`, else 0 (a point past the
/// end is computed on point 0's values and its result discarded).
#[cube]
fn in_batch(i: usize, n: usize) -> usize {
    let mut q = 0usize;
    if i < n {
        q = i;
    }
    q
}
