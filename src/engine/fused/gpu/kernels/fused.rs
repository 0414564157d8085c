//! The fused GPU training step as two CubeCL kernels per optimizer step (one
//! source for Vulkan, DX12, Metal through wgpu, and CUDA). The general form:
//! any micro-batch (ranges or index lists) and gradient accumulation. Full-batch
//! steps usually run in [`crate::engine::fused::gpu::kernels::persistent`] instead, many per launch.
//!
//! `fused_grad`: one pass over the points of a micro-batch. Each unit (or
//! group of lanes, for wide layers) walks a grid-stride loop with the weights in
//! shared memory and the hidden activations and its own gradient accumulators
//! in registers (the hidden width is a compile-time constant, so the loops
//! unroll). Each cube then reduces its units' accumulators
//! ([`cube_gradient`]) and writes one row of partial sums:
//! `partials[cube][p + 1]` (the last column is the loss).
//!
//! `reduce_update`: one cube; its units split the partial rows of each parameter
//! between them and combine in shared memory. Sums the partial rows,
//! adds the gradient carried from earlier micro-batches, and either carries the
//! sum on (accumulation) or applies the optimizer to the f32 master weights in
//! place and writes the step's mean loss. Nothing is read back to the host.
//!
//! Envelope of this kernel: one hidden layer of up to [`MAX_GPU_HIDDEN`] units, 1–16 inputs
//! and outputs, at most [`MAX_GPU_PARAMS`] parameters, f32. Wide layers share
//! each point between several units ([`crate::engine::fused::gpu::kernels::split`]).

use crate::engine::fused::gpu::kernels::args::{Batch, Points, Rule, State, Walk};
use crate::engine::fused::gpu::kernels::math::{new_m, new_p, new_v};
use crate::engine::fused::gpu::kernels::ops::cube_gradient;
use crate::engine::fused::gpu::shape::{Pass, Shape};
use cubecl::prelude::*;

pub use crate::engine::fused::gpu::kernels::ops::CUBE_UNITS;
pub use crate::engine::fused::gpu_kernel_limits::{MAX_GPU_HIDDEN, MAX_GPU_PARAMS};

/// Forward, loss and backward over `count` points from `start` of `points`
/// (or its index list), times `scale`; per-cube partial sums out.
#[cube(launch, launch_unchecked)]
pub fn fused_grad<F: Float + CubeElement>(
    points: &Points<F>,
    params: &Array<F>,
    partials: &mut Array<F>,
    batch: Batch<F>,
    #[comptime] shape: Shape,
    #[comptime] pass: Pass,
) {
    let np = comptime!(shape.params());
    let scratch = comptime!(pass.scratch);
    let width = np + 1;
    let mut w = SharedMemory::<F>::new(np);
    let mut k = UNIT_POS as usize;
    while k < np {
        w[k] = params[k];
        k += CUBE_DIM as usize;
    }
    sync_cube();

    let walk = Walk::<F> {
        start: batch.start,
        count: batch.count,
        first: ABSOLUTE_POS,
        stride: CUBE_COUNT * CUBE_DIM as usize,
        scale: batch.scale,
    };
    let mut red = SharedMemory::<F>::new(scratch);
    let mut row = SharedMemory::<F>::new(width);
    cube_gradient::<F>(points, &w, &mut red, &mut row, &walk, shape, pass);
    let mut unit = UNIT_POS as usize;
    while unit < width {
        partials[CUBE_POS * width + unit] = row[unit];
        unit += CUBE_DIM as usize;
    }
}

/// Values of a gradient row of `width` that one cube of [`reduce_update`]
/// sums: the whole row up to 128, else 32 (eight units a value).
pub fn reduce_values(width: usize) -> usize {
    if width <= 128 {
        width
    } else {
        32
    }
}

/// Sums `cubes` partial rows into the carried gradient; with `apply` (not 0,
/// a runtime flag, so one compiled kernel serves both), steps the optimizer
/// on `state` by `rule` and writes the mean loss to `state.loss[0]`. Cubes of
/// 256 units, each taking [`reduce_values`] values of the row: unit `t` sums
/// every `lanes`-th partial row of its value, then the lanes of each value
/// are combined in shared memory. (One unit a value made each unit wait on
/// ~66 loads in turn for 264 rows, ~9 µs of a 3 × 64 step.)
#[cube(launch)]
pub fn reduce_update<F: Float + CubeElement>(
    partials: &Array<F>,
    state: &mut State<F>,
    carry: &mut Array<F>,
    cubes: u32,
    rule: Rule<F>,
    apply: u32,
    #[comptime] shape: Shape,
) {
    let np = comptime!(shape.params());
    let opt = comptime!(shape.opt);
    let t = UNIT_POS as usize;
    let units = CUBE_DIM as usize;
    let width = np + 1;
    let per = comptime!(reduce_values(np + 1));
    let lanes = units / per;
    let mut lane_sums = SharedMemory::<F>::new(256usize);
    let lane = t / per;
    let j = CUBE_POS * per + t % per;
    let mut s = F::new(0.0);
    if lane < lanes && j < width {
        // Four rows at a time (four loads in flight), in a fixed order.
        let mut s4 = Array::<F>::new(4usize);
        #[unroll]
        for q in 0..4usize {
            s4[q] = F::new(0.0);
        }
        let rows = cubes as usize;
        let mut c = lane;
        while c + 3 * lanes < rows {
            #[unroll]
            for q in 0..4usize {
                s4[q] += partials[(c + q * lanes) * width + j];
            }
            c += 4 * lanes;
        }
        while c < rows {
            s4[0] += partials[c * width + j];
            c += lanes;
        }
        s = (s4[0] + s4[1]) + (s4[2] + s4[3]);
    }
    lane_sums[t] = s;
    sync_cube();
    if lane == 0usize && j < width {
        let mut total = carry[j];
        for l in 0..lanes {
            total += lane_sums[l * per + t];
        }
        if apply == 0u32 {
            carry[j] = total;
        } else {
            carry[j] = F::new(0.0);
            if j == np {
                state.loss[0] = total;
            } else {
                let pj = state.params[j];
                let mj = new_m::<F>(pj, total, state.m[j], &rule, opt);
                let vj = new_v::<F>(pj, total, state.v[j], &rule, opt);
                state.m[j] = mj;
                state.v[j] = vj;
                state.params[j] = new_p::<F>(pj, mj, vj, total, &rule, opt);
            }
        }
    }
}

/// Sets every value of `a` to zero (the carried gradient, in place: no new buffer).
#[cube(launch)]
pub fn zero<F: Float + CubeElement>(a: &mut Array<F>) {
    if ABSOLUTE_POS < a.len() {
        a[ABSOLUTE_POS] = F::new(0.0);
    }
}
