//! The persistent fused kernel: many full-batch optimizer steps in one launch.
//!
//! At small N the two-launch step ([`crate::engine::fused::gpu::kernels::fused`]) costs two kernel
//! launches and a global-memory round trip per step, far more than its
//! arithmetic. `fused_steps` keeps every cube alive across steps; cubes
//! exchange their gradient rows through global memory instead of ending the
//! kernel:
//!
//! 1. each cube runs forward+backward over its share of the step's points and
//!    reduces them to one row ([`cube_gradient`]);
//! 2. it publishes the row in `rows[buf][cube]`;
//! 3. cube `c` sums column `j ≡ c (mod cubes)` over all rows (fixed order) and
//!    writes the total into every cube's mailbox `totals[buf][cube][j]` (one
//!    poller per slot: polling one shared slot from every cube serialises);
//! 4. every cube reads its mailbox and applies the optimizer to its own copy of
//!    the weights and moments in shared memory — the same arithmetic in the same
//!    order, so the copies stay bit-identical; cube 0 writes them back at the end.
//!
//! Synchronisation is by data, not by a barrier counter: each published value
//! carries a tag in its lowest mantissa bit (step `e` uses buffer `e % 2` and tag
//! `(e / 2) % 2`), and readers spin with atomic loads until the tag they expect
//! appears. A value and its tag are one 32-bit atomic, so no cross-address
//! memory ordering is needed (CubeCL has no device-wide fence); the tag costs
//! the gradient one bit of mantissa (relative 1.2e-7), never the weights.
//!
//! Every cube must be resident at once, or the spinning cubes wait for ones
//! that never start. The engine probes the largest grid that completes
//! (`gpu`), and spins are bounded: a cube that waits `spin_limit`
//! polls, or sees another cube's failure, sets `status[0]` and the launch ends
//! early; `loss_out[1]` is then 1 and the engine reports it.

use crate::engine::fused::gpu::kernels::math::{new_m, new_p, new_v};
use crate::engine::fused::gpu::kernels::ops::{cube_gradient, cube_sum};
use crate::engine::fused::gpu::shape::{Pass, Shape};
use cubecl::prelude::*;

/// Fields per step in the `plan_f` argument: lr, bias1, bias2, scale, first.
pub const PLAN_F: usize = 5;
/// Fields per step in the `plan_u` argument: start, len.
pub const PLAN_U: usize = 2;

/// `v` with its lowest bit replaced by `tag`.
#[cube]
fn tagged<F: Float>(v: F, tag: u32) -> u32 {
    (u32::reinterpret(v) & 0xFFFF_FFFEu32) | tag
}

/// Waits until `slots[i]` carries `tag`; returns its value. Gives up after
/// about `limit` polls or once `status[0]` says another unit gave up, and then
/// records the failure in `status` and `flag`.
#[cube]
fn await_tagged<F: Float>(
    slots: &Array<Atomic<u32>>,
    i: usize,
    tag: u32,
    limit: u32,
    status: &Array<Atomic<u32>>,
    flag: &mut SharedMemory<u32>,
) -> F {
    let mut bits = slots[i].load();
    let mut tries = 0u32;
    let mut gave_up = false;
    while (bits & 1u32) != tag && !gave_up {
        tries += 1u32;
        if (tries & 63u32) == 0u32 && (tries >= limit || status[0].load() != 0u32) {
            gave_up = true;
        }
        bits = slots[i].load();
    }
    if gave_up {
        status[0].store(1u32);
        flag[0] = 1u32;
    }
    F::reinterpret(bits & 0xFFFF_FFFEu32)
}

/// Runs `steps` full-batch optimizer steps. `epoch` counts the steps earlier
/// launches ran on the same `rows`/`totals` buffers (their tags continue).
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub fn fused_steps<F: Float + CubeElement>(
    x: &Array<F>,
    y: &Array<F>,
    params: &mut Array<F>,
    m: &mut Array<F>,
    v: &mut Array<F>,
    loss_out: &mut Array<F>,
    rows: &mut Array<Atomic<u32>>,
    totals: &mut Array<Atomic<u32>>,
    status: &mut Array<Atomic<u32>>,
    plan_u: &Array<u32>,
    plan_f: &Array<F>,
    steps: u32,
    epoch: u32,
    spin_limit: u32,
    wd: F,
    #[comptime] shape: Shape,
    #[comptime] pass: Pass,
) {
    let inputs = comptime!(shape.inputs);
    let hidden = comptime!(shape.hidden);
    let outputs = comptime!(shape.outputs);
    let opt = comptime!(shape.opt);
    let plane = comptime!(pass.plane);
    let scratch = comptime!(pass.scratch);
    let np = hidden * inputs + hidden + outputs * hidden + outputs;
    let width = np + 1;
    let t = UNIT_POS as usize;
    let c = CUBE_POS;
    let cubes = CUBE_COUNT;
    let units = CUBE_DIM as usize;
    let mut w = SharedMemory::<F>::new(width);
    let mut ms = SharedMemory::<F>::new(width);
    let mut vs = SharedMemory::<F>::new(width);
    let mut row = SharedMemory::<F>::new(width);
    let mut red = SharedMemory::<F>::new(scratch);
    let mut flag = SharedMemory::<u32>::new(1usize);
    let mut bcast = SharedMemory::<F>::new(1usize);
    let mut k = t;
    while k < width {
        w[k] = F::new(0.0);
        if k < np {
            w[k] = params[k];
        }
        ms[k] = m[k];
        vs[k] = v[k];
        k += units;
    }
    if t == 0 {
        flag[0] = 0u32;
    }
    sync_cube();

    let mut s = 0u32;
    let mut failed = false;
    while s < steps && !failed {
        let e = epoch + s;
        let buf = (e % 2u32) as usize;
        let tag = (e / 2u32) % 2u32;
        let su = s as usize;
        cube_gradient::<F>(
            x,
            y,
            plan_u,
            &w,
            &mut red,
            &mut row,
            plan_u[PLAN_U * su],
            plan_u[PLAN_U * su + 1],
            ABSOLUTE_POS,
            cubes * units,
            plan_f[PLAN_F * su + 3],
            shape,
            pass,
        );
        let mut q = t;
        while q < width {
            rows[(buf * cubes + c) * width + q].store(tagged::<F>(row[q], tag));
            q += units;
        }
        // This cube's columns: the same units read the same slots every step.
        let mut j = c;
        while j < width {
            let mut sum = F::new(0.0);
            let mut r = t;
            while r < cubes {
                let i = (buf * cubes + r) * width + j;
                sum += await_tagged::<F>(rows, i, tag, spin_limit, status, &mut flag);
                r += units;
            }
            let total = cube_sum::<F>(sum, &mut red, plane);
            if t == 0 {
                bcast[0] = total;
            }
            sync_cube();
            // Into every cube's own mailbox: one poller per slot, no contention.
            let tot = bcast[0];
            let mut r = t;
            while r < cubes {
                totals[(buf * cubes + r) * width + j].store(tagged::<F>(tot, tag));
                r += units;
            }
            sync_cube();
            j += cubes;
        }
        let mut q = t;
        while q < width {
            let i = (buf * cubes + c) * width + q;
            let g = await_tagged::<F>(totals, i, tag, spin_limit, status, &mut flag);
            if q == np {
                w[np] = g;
            } else {
                let lr = plan_f[PLAN_F * su];
                let bias1 = plan_f[PLAN_F * su + 1];
                let bias2 = plan_f[PLAN_F * su + 2];
                let first = plan_f[PLAN_F * su + 4] > F::new(0.5);
                let pj = w[q];
                let mj = new_m::<F>(pj, g, ms[q], wd, first, opt);
                let vj = new_v::<F>(pj, g, vs[q], wd, opt);
                ms[q] = mj;
                vs[q] = vj;
                w[q] = new_p::<F>(pj, mj, vj, g, lr, wd, bias1, bias2, opt);
            }
            q += units;
        }
        sync_cube();
        failed = flag[0] != 0u32;
        s += 1u32;
    }
    if c == 0 {
        let mut k = t;
        while k < np {
            params[k] = w[k];
            m[k] = ms[k];
            v[k] = vs[k];
            k += units;
        }
        if t == 0 {
            // w[np] holds the last step's loss.
            loss_out[0] = w[np];
            loss_out[1] = F::new(0.0);
            if status[0].load() != 0u32 {
                loss_out[1] = F::new(1.0);
            }
        }
    }
}
