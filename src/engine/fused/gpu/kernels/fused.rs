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

use crate::config::OptimizerKind;
use crate::engine::fused::gpu::kernels::math::{new_m, new_p, new_v};
use crate::engine::fused::gpu::kernels::ops::cube_gradient;
use crate::engine::fused::gpu::shape::{Pass, Shape};
use cubecl::prelude::*;

pub use crate::engine::fused::gpu::kernels::ops::CUBE_UNITS;
pub use crate::engine::fused::gpu_kernel_limits::{MAX_GPU_HIDDEN, MAX_GPU_PARAMS};

/// Forward, loss and backward over `count` points; per-cube partial sums out.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub fn fused_grad<F: Float + CubeElement>(
    x: &Array<F>,
    y: &Array<F>,
    idx: &Array<u32>,
    params: &Array<F>,
    partials: &mut Array<F>,
    start: u32,
    count: u32,
    scale: F,
    #[comptime] shape: Shape,
    #[comptime] pass: Pass,
) {
    let inputs = comptime!(shape.inputs);
    let hidden = comptime!(shape.hidden);
    let outputs = comptime!(shape.outputs);
    let scratch = comptime!(pass.scratch);
    let np = hidden * inputs + hidden + outputs * hidden + outputs;
    let width = np + 1;
    let mut w = SharedMemory::<F>::new(np);
    let mut k = UNIT_POS as usize;
    while k < np {
        w[k] = params[k];
        k += CUBE_DIM as usize;
    }
    sync_cube();

    let stride = CUBE_COUNT * CUBE_DIM as usize;
    let mut red = SharedMemory::<F>::new(scratch);
    let mut row = SharedMemory::<F>::new(width);
    cube_gradient::<F>(
        x,
        y,
        idx,
        &w,
        &mut red,
        &mut row,
        start,
        count,
        ABSOLUTE_POS,
        stride,
        scale,
        shape,
        pass,
    );
    let mut unit = UNIT_POS as usize;
    while unit < width {
        partials[CUBE_POS * width + unit] = row[unit];
        unit += CUBE_DIM as usize;
    }
}

/// Sums `cubes` partial rows into the carried gradient; with `apply` (not 0,
/// a runtime flag, so one compiled kernel serves both), runs the
/// optimizer on `params` and writes the mean loss to `loss_out[0]`.
/// `opt`: 0 sgd, 1 momentum, 2 adam, 3 adamw. Cubes of 256 units. A row of at
/// most 128 values takes one cube: unit `t` sums every `lanes`-th partial row of
/// value `t % (np + 1)`, then the lanes of each value are combined in shared
/// memory. A wider row takes one unit per value over ⌈(np + 1) / 256⌉ cubes.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub fn reduce_update<F: Float + CubeElement>(
    partials: &Array<F>,
    params: &mut Array<F>,
    m: &mut Array<F>,
    v: &mut Array<F>,
    carry: &mut Array<F>,
    loss_out: &mut Array<F>,
    cubes: u32,
    lr: F,
    wd: F,
    bias1: F,
    bias2: F,
    first: u32,
    #[comptime] np: usize,
    #[comptime] opt: OptimizerKind,
    apply: u32,
) {
    let t = UNIT_POS as usize;
    let units = CUBE_DIM as usize;
    let width = np + 1;
    let mut lanes = units / width;
    if lanes == 0usize {
        lanes = 1usize;
    }
    let mut lane_sums = SharedMemory::<F>::new(256usize);
    let lane = t / width;
    let j = CUBE_POS * units + t % width;
    let mut s = F::new(0.0);
    if lane < lanes && j < width {
        let mut c = lane;
        while c < cubes as usize {
            s += partials[c * width + j];
            c += lanes;
        }
    }
    lane_sums[t] = s;
    sync_cube();
    if lane == 0usize && j < width {
        let mut total = carry[j];
        for l in 0..lanes {
            total += lane_sums[l * width + t];
        }
        if apply == 0u32 {
            carry[j] = total;
        } else {
            carry[j] = F::new(0.0);
            if j == np {
                loss_out[0] = total;
            } else {
                let pj = params[j];
                let mj = new_m::<F>(pj, total, m[j], wd, first != 0u32, opt);
                let vj = new_v::<F>(pj, total, v[j], wd, opt);
                m[j] = mj;
                v[j] = vj;
                params[j] = new_p::<F>(pj, mj, vj, total, lr, wd, bias1, bias2, opt);
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
