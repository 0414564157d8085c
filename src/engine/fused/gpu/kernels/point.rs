//! One unit a point: forward, loss and backward of a one-hidden-layer model
//! for each point a unit walks, summed into the unit's own gradient row in
//! registers ([`point_pass`]); the cube then reduces the rows
//! ([`crate::engine::fused::gpu::kernels::ops::cube_gradient`]). Used where a whole row fits in a
//! unit's registers (the seed job); wider layers split a point over lanes
//! ([`crate::engine::fused::gpu::kernels::split`]).
//!
//! Every point costs a few multiply-adds a hidden unit and two loads, so the
//! pass keeps each unit's activation from the forward pass instead of
//! recomputing it and, with one output, leaves the output weight out of the
//! first layer's per-point sums ([`fold_output_weight`]) and, for ReLU, makes
//! the output weight's sum from them ([`output_sum_from_first`]). At large N
//! the points come from device memory: a unit loads the next group of
//! [`LOAD_AHEAD`] points while it computes the current one. Both together:
//! the seed job at N = 1e8 40.1 → 30.9 ms on CUDA and 51.0 → 36.3 ms on
//! Vulkan (H200; the sums alone made CUDA slower, 56.9 ms —
//! docs/PERFORMANCE.md, "Loads a group ahead").

use crate::config::Activation;
use crate::engine::fused::gpu::kernels::args::{Points, Walk};
use crate::engine::fused::gpu::kernels::math::{act_bwd_at, act_fwd, loss_grad, loss_value};
use crate::engine::fused::gpu::shape::{keeps_z, Pass, Shape};
use cubecl::prelude::*;

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
    if comptime!(ahead > 1) {
        // Whole groups of `ahead` points, the next group's loads issued
        // before the current group computes: at large N the data comes from
        // device memory, and a group's own arithmetic did not cover its own
        // loads' latency.
        let mut xn = Array::<F>::new(ahead * inputs);
        let mut yn = Array::<F>::new(ahead * outputs);
        let span = (ahead - 1usize) * stride;
        let mut have = i + span < n;
        if have {
            load_group::<F>(points, &mut xk, &mut yk, walk.start, i, stride, shape, pass);
        }
        while have {
            let next = i + ahead * stride;
            let more = next + span < n;
            if more {
                load_group::<F>(
                    points, &mut xn, &mut yn, walk.start, next, stride, shape, pass,
                );
            }
            #[unroll]
            for u in 0..ahead {
                point_grad::<F>(&xk, &yk, u, w, &wr, acc, shape);
            }
            #[unroll]
            for k in 0..comptime!(ahead * inputs) {
                xk[k] = xn[k];
            }
            #[unroll]
            for k in 0..comptime!(ahead * outputs) {
                yk[k] = yn[k];
            }
            i = next;
            have = more;
        }
    }
    // The remaining points (all of them when loading one at a time).
    while i < n {
        let p = points.at(walk.start, i, use_idx);
        points.load(&mut xk, &mut yk, p, 0usize, inputs, outputs);
        point_grad::<F>(&xk, &yk, 0usize, w, &wr, acc, shape);
        i += stride;
    }
    fold_output_weight::<F>(w, &wr, acc, shape);
}

/// Inputs and targets of the `ahead` points `i`, `i + stride`, … of the walk
/// starting at `start` into `xk` and `yk`.
#[cube]
#[allow(clippy::too_many_arguments)]
fn load_group<F: Float>(
    points: &Points<F>,
    xk: &mut Array<F>,
    yk: &mut Array<F>,
    start: u32,
    i: usize,
    stride: usize,
    #[comptime] shape: Shape,
    #[comptime] pass: Pass,
) {
    #[unroll]
    for u in 0..comptime!(pass.ahead) {
        let p = points.at(start, i + u * stride, comptime!(pass.use_idx));
        points.load(
            xk,
            yk,
            p,
            u,
            comptime!(shape.inputs),
            comptime!(shape.outputs),
        );
    }
}

/// Whether the point pass copies the weights to registers.
fn in_registers(shape: &Shape) -> bool {
    shape.params() <= REGISTER_WEIGHTS
}

/// Forward, loss and backward of point `u` of `xk`/`yk`, added into `acc`
/// (weights from the register copy `wr` when they are in registers, else `w`).
///
/// With one output, the first layer's sums are taken without the output
/// weight: δz_j = act'(z_j)·w2_j·δ, and w2_j is the same for every point of
/// the pass, so `acc` gathers Σ act'(z_j)·δ·x and Σ act'(z_j)·δ and
/// [`fold_output_weight`] multiplies them by w2_j once the points are done —
/// two multiplies a hidden unit fewer per point (w2_j·δ, and its product
/// with act'), besides the recomputed z and act(z) that keeping act(z) saves.
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
    let with_z = comptime!(keeps_z(act));
    let ob1 = hidden * inputs;
    let ow2 = ob1 + hidden;
    let ob2 = ow2 + outputs * hidden;
    let np = ob2 + outputs;
    let mut xs = Array::<F>::new(inputs);
    let mut outs = Array::<F>::new(outputs);
    let mut ds = Array::<F>::new(outputs);
    // What the backward pass needs of each hidden unit: z where the
    // activation's derivative needs it, else act(z) (`act_bwd_at`).
    let mut kept = Array::<F>::new(hidden);
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
        let zj = pre_activation::<F>(w, wr, &xs, j, inputs, ob1, regs);
        let aj = act_fwd::<F>(zj, act);
        if comptime!(with_z) {
            kept[j] = zj;
        } else {
            kept[j] = aj;
        }
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
    if comptime!(outputs == 1) {
        let d = ds[0];
        let mut dx = Array::<F>::new(inputs);
        #[unroll]
        for a in 0..inputs {
            dx[a] = d * xs[a];
        }
        #[unroll]
        for j in 0..hidden {
            let v = kept[j];
            if comptime!(!output_sum_from_first(act)) {
                let aj = kept_activation::<F>(v, act);
                acc[ow2 + j] += d * aj;
            }
            let slope = act_bwd_at::<F>(v, act);
            #[unroll]
            for a in 0..inputs {
                acc[j * inputs + a] += slope * dx[a];
            }
            acc[ob1 + j] += slope * d;
        }
    } else {
        #[unroll]
        for j in 0..hidden {
            let v = kept[j];
            let aj = kept_activation::<F>(v, act);
            let mut back = F::new(0.0);
            #[unroll]
            for o in 0..outputs {
                acc[ow2 + o * hidden + j] += ds[o] * aj;
                back += weight::<F>(w, wr, ow2 + o * hidden + j, regs) * ds[o];
            }
            let dz = back * act_bwd_at::<F>(v, act);
            #[unroll]
            for a in 0..inputs {
                acc[j * inputs + a] += dz * xs[a];
            }
            acc[ob1 + j] += dz;
        }
    }
}

/// act(z) from what [`point_grad`] kept of a unit: z itself where the
/// activation's derivative needs it ([`keeps_z`]), else act(z) already.
#[cube]
fn kept_activation<F: Float>(v: F, #[comptime] act: Activation) -> F {
    if comptime!(keeps_z(act)) {
        act_fwd::<F>(v, act)
    } else {
        v
    }
}

/// Whether, with one output, the output weight's sum Σ δ·act(z_j) follows
/// from the first layer's: ReLU is positively homogeneous, act(z) =
/// act'(z)·z, so Σ δ·act(z_j) = Σ_a w1[j, a]·Σ act'(z_j)·δ·x_a +
/// b1_j·Σ act'(z_j)·δ — sums `acc` gathers anyway. [`point_grad`] then skips
/// a multiply-add a hidden unit per point (one of seven on the seed job's
/// step) and [`fold_output_weight`] makes the sum once a pass.
pub fn output_sum_from_first(act: Activation) -> bool {
    act == Activation::Relu
}

/// With one output, multiplies the first layer's sums in `acc` by their
/// unit's output weight ([`point_grad`] leaves it out), after making the
/// output weight's sum from them where [`output_sum_from_first`]; a no-op
/// otherwise.
#[cube]
fn fold_output_weight<F: Float>(
    w: &SharedMemory<F>,
    wr: &Array<F>,
    acc: &mut Array<F>,
    #[comptime] shape: Shape,
) {
    let inputs = comptime!(shape.inputs);
    let hidden = comptime!(shape.hidden);
    let regs = comptime!(in_registers(&shape));
    if comptime!(shape.outputs == 1) {
        let ob1 = hidden * inputs;
        #[unroll]
        for j in 0..hidden {
            let mut w1 = Array::<F>::new(inputs);
            #[unroll]
            for a in 0..inputs {
                w1[a] = weight::<F>(w, wr, j * inputs + a, regs);
            }
            let at = UnitSums {
                w1: j * inputs,
                b1: ob1 + j,
                w2: ob1 + hidden + j,
            };
            let b1 = weight::<F>(w, wr, ob1 + j, regs);
            let w2 = weight::<F>(w, wr, ob1 + hidden + j, regs);
            fold_unit::<F>(acc, &w1, b1, w2, at, inputs, shape.act);
        }
    }
}

/// Where one hidden unit's sums sit in a gradient row: its first-layer
/// weights' (`inputs` of them from `w1`), its bias's, its output weight's.
#[derive(CubeType, Clone, Copy)]
pub struct UnitSums {
    /// The first of its first-layer weights' sums.
    pub w1: usize,
    /// Its bias's sum.
    pub b1: usize,
    /// Its output weight's sum.
    pub w2: usize,
}

/// [`fold_output_weight`] for one hidden unit of weights `w1`, `b1`, `w2`
/// whose sums in `acc` are `at`: where [`output_sum_from_first`], its output
/// weight's sum from its first-layer sums, then those times `w2`. The split
/// pass folds each of a lane's units with it too.
#[cube]
#[allow(clippy::too_many_arguments)]
pub fn fold_unit<F: Float>(
    acc: &mut Array<F>,
    w1: &Array<F>,
    b1: F,
    w2: F,
    at: UnitSums,
    #[comptime] inputs: usize,
    #[comptime] act: Activation,
) {
    if comptime!(output_sum_from_first(act)) {
        let mut s = b1 * acc[at.b1];
        #[unroll]
        for a in 0..inputs {
            s += w1[a] * acc[at.w1 + a];
        }
        acc[at.w2] = s;
    }
    #[unroll]
    for a in 0..inputs {
        acc[at.w1 + a] *= w2;
    }
    acc[at.b1] *= w2;
}
