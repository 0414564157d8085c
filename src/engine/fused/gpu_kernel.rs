//! The fused GPU training step as two CubeCL kernels (one source for Vulkan,
//! DX12, Metal through wgpu, and CUDA).
//!
//! `fused_grad`: one pass over the points of a micro-batch. Each unit walks a
//! grid-stride loop; for each point it runs forward, loss and backward with the
//! weights in shared memory and the hidden activations and its own gradient
//! accumulators in registers (the hidden width is a compile-time constant, so
//! the loops unroll). At the end each cube reduces its units' accumulators in
//! shared memory and writes one row of partial sums: `partials[cube][p + 1]`
//! (the last column is the loss).
//!
//! `reduce_update`: one cube; its units split the partial rows of each parameter
//! between them and combine in shared memory. Sums the partial rows,
//! adds the gradient carried from earlier micro-batches, and either carries the
//! sum on (accumulation) or applies the optimizer to the f32 master weights in
//! place and writes the step's mean loss. Nothing is read back to the host.
//!
//! Envelope: one hidden layer of up to [`MAX_GPU_HIDDEN`] units, 1–16 inputs
//! and outputs, at most [`MAX_GPU_PARAMS`] parameters (each unit keeps one
//! accumulator per parameter in registers), f32.

use cubecl::prelude::*;

pub use super::gpu_kernel_limits::{MAX_GPU_HIDDEN, MAX_GPU_PARAMS};
/// Units per cube of `fused_grad` (a power of two, for the tree reduction).
pub const CUBE_UNITS: u32 = 256;
/// Accumulators reduced together per round of the cube reduction.
const ROWS: usize = 8;

/// act(z). `act`: 0 relu, 1 tanh, 2 sigmoid, 3 silu, 4 gelu.
#[cube]
fn act_fwd<F: Float>(z: F, #[comptime] act: u32) -> F {
    if act == 0 {
        if z > F::new(0.0) {
            z
        } else {
            F::new(0.0)
        }
    } else if act == 1 {
        F::tanh(z)
    } else if act == 2 {
        F::new(1.0) / (F::new(1.0) + F::exp(F::new(0.0) - z))
    } else if act == 3 {
        z / (F::new(1.0) + F::exp(F::new(0.0) - z))
    } else {
        F::new(0.5) * z * (F::new(1.0) + F::erf(z * F::new(0.70710677)))
    }
}

/// d act(z) / dz.
#[cube]
fn act_bwd<F: Float>(z: F, #[comptime] act: u32) -> F {
    if act == 0 {
        if z > F::new(0.0) {
            F::new(1.0)
        } else {
            F::new(0.0)
        }
    } else if act == 1 {
        let t = F::tanh(z);
        F::new(1.0) - t * t
    } else if act == 2 {
        let s = F::new(1.0) / (F::new(1.0) + F::exp(F::new(0.0) - z));
        s * (F::new(1.0) - s)
    } else if act == 3 {
        let s = F::new(1.0) / (F::new(1.0) + F::exp(F::new(0.0) - z));
        s * (F::new(1.0) + z * (F::new(1.0) - s))
    } else {
        let cdf = F::new(0.5) * (F::new(1.0) + F::erf(z * F::new(0.70710677)));
        cdf + z * F::exp(F::new(-0.5) * z * z) * F::new(0.398_942_3)
    }
}

/// Loss of residual r. `loss`: 0 mse, 1 l1, 2 huber (delta 1).
#[cube]
fn loss_value<F: Float>(r: F, #[comptime] loss: u32) -> F {
    if loss == 0 {
        r * r
    } else if loss == 1 {
        F::abs(r)
    } else {
        let a = F::abs(r);
        if a < F::new(1.0) {
            F::new(0.5) * a * a
        } else {
            a - F::new(0.5)
        }
    }
}

/// d loss / d prediction.
#[cube]
fn loss_grad<F: Float>(r: F, #[comptime] loss: u32) -> F {
    if loss == 0 {
        F::new(2.0) * r
    } else if loss == 1 {
        if r > F::new(0.0) {
            F::new(1.0)
        } else if r < F::new(0.0) {
            F::new(-1.0)
        } else {
            F::new(0.0)
        }
    } else {
        F::clamp(r, F::new(-1.0), F::new(1.0))
    }
}

/// z_j = b1_j + Σ_a w1[j, a]·x_a for hidden unit `j` (weights in shared memory).
#[cube]
fn pre_activation<F: Float>(
    w: &SharedMemory<F>,
    xs: &Array<F>,
    j: usize,
    #[comptime] inputs: usize,
    #[comptime] ob1: usize,
) -> F {
    let mut z = w[ob1 + j];
    #[unroll]
    for a in 0..inputs {
        z += w[j * inputs + a] * xs[a];
    }
    z
}

/// Forward, loss and backward over `count` points; per-cube partial sums out.
/// Parameters are laid out like `Params::flatten`: `[w1 (H x I) | b1 (H) | w2 (O x H) | b2 (O)]`.
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
    #[comptime] inputs: usize,
    #[comptime] hidden: usize,
    #[comptime] outputs: usize,
    #[comptime] act: u32,
    #[comptime] loss: u32,
    #[comptime] use_idx: bool,
) {
    // Offsets of w1 [H x I], b1 [H], w2 [O x H], b2 [O] in the flat parameters.
    let ob1 = hidden * inputs;
    let ow2 = ob1 + hidden;
    let ob2 = ow2 + outputs * hidden;
    let np = ob2 + outputs;
    let mut w = SharedMemory::<F>::new(np);
    let mut k = UNIT_POS as usize;
    while k < np {
        w[k] = params[k];
        k += CUBE_DIM as usize;
    }
    sync_cube();

    let mut acc = Array::<F>::new(np + 1);
    #[unroll]
    for j in 0..np + 1 {
        acc[j] = F::new(0.0);
    }
    let mut xs = Array::<F>::new(inputs);
    let mut outs = Array::<F>::new(outputs);
    let mut ds = Array::<F>::new(outputs);
    let stride = CUBE_COUNT * CUBE_DIM as usize;
    let n = count as usize;
    let mut i = ABSOLUTE_POS;
    while i < n {
        let mut p = start as usize + i;
        if use_idx {
            p = idx[i] as usize;
        }
        #[unroll]
        for a in 0..inputs {
            xs[a] = x[p * inputs + a];
        }
        #[unroll]
        for o in 0..outputs {
            outs[o] = w[ob2 + o];
        }
        #[unroll]
        for j in 0..hidden {
            let aj = act_fwd::<F>(pre_activation::<F>(&w, &xs, j, inputs, ob1), act);
            #[unroll]
            for o in 0..outputs {
                outs[o] += w[ow2 + o * hidden + j] * aj;
            }
        }
        #[unroll]
        for o in 0..outputs {
            let r = outs[o] - y[p * outputs + o];
            acc[np] += loss_value::<F>(r, loss);
            let d = loss_grad::<F>(r, loss);
            ds[o] = d;
            acc[ob2 + o] += d;
        }
        #[unroll]
        for j in 0..hidden {
            // Recomputing z costs I multiply-adds; keeping H of them would cost registers.
            let zj = pre_activation::<F>(&w, &xs, j, inputs, ob1);
            let aj = act_fwd::<F>(zj, act);
            let mut back = F::new(0.0);
            #[unroll]
            for o in 0..outputs {
                acc[ow2 + o * hidden + j] += ds[o] * aj;
                back += w[ow2 + o * hidden + j] * ds[o];
            }
            let dz = back * act_bwd::<F>(zj, act);
            #[unroll]
            for a in 0..inputs {
                acc[j * inputs + a] += dz * xs[a];
            }
            acc[ob1 + j] += dz;
        }
        i += stride;
    }

    // Tree-reduce the accumulators across the cube, ROWS at a time: the
    // unrolled part is only the stores, the tree is one runtime loop.
    let mut red = SharedMemory::<F>::new(ROWS * 256usize);
    let unit = UNIT_POS as usize;
    let rows_total = np + 1;
    #[unroll]
    for c in 0..rows_total.div_ceil(ROWS) {
        #[unroll]
        for r in 0..ROWS {
            let j = c * ROWS + r;
            if j < rows_total {
                red[r * 256usize + unit] = acc[j] * scale;
            } else {
                red[r * 256usize + unit] = F::new(0.0);
            }
        }
        sync_cube();
        let mut half = (CUBE_DIM / 2u32) as usize;
        while half > 0usize {
            if unit < half {
                for r in 0..ROWS {
                    let other = red[r * 256usize + unit + half];
                    red[r * 256usize + unit] += other;
                }
            }
            sync_cube();
            half /= 2usize;
        }
        if unit < ROWS {
            let j = c * ROWS + unit;
            if j < rows_total {
                partials[CUBE_POS * rows_total + j] = red[unit * 256usize];
            }
        }
        sync_cube();
    }
}

/// Sums `cubes` partial rows into the carried gradient; with `apply`, runs the
/// optimizer on `params` and writes the mean loss to `loss_out[0]`.
/// `opt`: 0 sgd, 1 momentum, 2 adam, 3 adamw. One cube of 256 units: unit `t`
/// sums every `lanes`-th partial row of parameter `t % (np + 1)`, then the
/// lanes of each parameter are combined in shared memory.
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
    #[comptime] opt: u32,
    #[comptime] apply: bool,
) {
    let t = UNIT_POS as usize;
    let width = np + 1;
    let lanes = CUBE_DIM as usize / width;
    let mut lane_sums = SharedMemory::<F>::new(256usize);
    let lane = t / width;
    let j = t % width;
    let mut s = F::new(0.0);
    if lane < lanes {
        let mut c = lane;
        while c < cubes as usize {
            s += partials[c * width + j];
            c += lanes;
        }
    }
    lane_sums[t] = s;
    sync_cube();
    if t < width {
        let mut total = carry[t];
        for l in 0..lanes {
            total += lane_sums[l * width + t];
        }
        if !apply {
            carry[t] = total;
        } else {
            carry[t] = F::new(0.0);
            if t == np {
                loss_out[0] = total;
            } else {
                let pj = params[t];
                if opt == 0 {
                    params[t] = pj - lr * (total + wd * pj);
                } else if opt == 1 {
                    let g = total + wd * pj;
                    let mut mj = g;
                    if first == 0u32 {
                        mj = F::new(0.9) * m[t] + g;
                    }
                    m[t] = mj;
                    params[t] = pj - lr * mj;
                } else {
                    let mut g = total;
                    if opt == 2 {
                        g = total + wd * pj;
                    }
                    let mj = F::new(0.9) * m[t] + F::new(0.1) * g;
                    let vj = F::new(0.999) * v[t] + F::new(0.001) * g * g;
                    m[t] = mj;
                    v[t] = vj;
                    let update = (mj / bias1) / (F::sqrt(vj / bias2) + F::new(0.00000001));
                    let mut decayed = pj;
                    if opt == 3 {
                        decayed = pj * (F::new(1.0) - lr * wd);
                    }
                    params[t] = decayed - lr * update;
                }
            }
        }
    }
}
