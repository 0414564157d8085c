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

use crate::engine::fused::gpu::kernels::args::{Exchange, Points, Rule, State, Walk};
use crate::engine::fused::gpu::kernels::math::{new_m, new_p, new_v};
use crate::engine::fused::gpu::kernels::ops::{cube_gradient, cube_sum};
use crate::engine::fused::gpu::kernels::rows;
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

/// The steps one launch runs: per step, `u` holds [`PLAN_U`] values (start,
/// len) and `f` [`PLAN_F`] (lr, bias1, bias2, scale, first); `epoch` counts
/// the steps earlier launches ran on the same exchange buffers (their tags
/// continue); a wait gives up after about `spin_limit` polls.
#[derive(CubeType, CubeLaunch)]
pub struct Plan<F: Float + CubeElement> {
    /// Per step, [`PLAN_U`] values: start, len.
    pub u: Array<u32>,
    /// Per step, [`PLAN_F`] values: lr, bias1, bias2, scale, first.
    pub f: Array<F>,
    /// Steps this launch runs.
    pub steps: u32,
    /// Steps earlier launches ran on the same exchange buffers.
    pub epoch: u32,
    /// Polls after which a wait gives up.
    pub spin_limit: u32,
    /// Weight decay.
    pub wd: F,
}

/// Runs `plan.steps` full-batch optimizer steps over the ranges of `points`.
#[cube(launch, launch_unchecked)]
pub fn fused_steps<F: Float + CubeElement>(
    points: &Points<F>,
    state: &mut State<F>,
    exchange: &mut Exchange,
    plan: &Plan<F>,
    #[comptime] shape: Shape,
    #[comptime] pass: Pass,
) {
    let opt = comptime!(shape.opt);
    let plane = comptime!(pass.plane);
    let scratch = comptime!(pass.scratch);
    let np = comptime!(shape.params());
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
    // Placed in this order at every compile (`rows::claim`; in a hash set's
    // order otherwise, a new one every compile: 127 or 128 registers).
    rows::claim::<F>(&mut w);
    rows::claim::<F>(&mut ms);
    rows::claim::<F>(&mut vs);
    rows::claim::<F>(&mut row);
    rows::claim::<F>(&mut red);
    rows::claim::<u32>(&mut flag);
    rows::claim::<F>(&mut bcast);
    let mut k = t;
    while k < width {
        w[k] = F::new(0.0);
        if k < np {
            w[k] = state.params[k];
        }
        ms[k] = state.m[k];
        vs[k] = state.v[k];
        k += units;
    }
    if t == 0 {
        flag[0] = 0u32;
    }
    sync_cube();

    let mut s = 0u32;
    let mut failed = false;
    let spin_limit = plan.spin_limit;
    while s < plan.steps && !failed {
        let e = plan.epoch + s;
        let buf = (e % 2u32) as usize;
        let tag = (e / 2u32) % 2u32;
        let su = s as usize;
        let walk = Walk::<F> {
            start: plan.u[PLAN_U * su],
            count: plan.u[PLAN_U * su + 1],
            first: ABSOLUTE_POS,
            stride: cubes * units,
            scale: plan.f[PLAN_F * su + 3],
        };
        let mut rule = Rule::<F> {
            lr: plan.f[PLAN_F * su],
            wd: plan.wd,
            bias1: plan.f[PLAN_F * su + 1],
            bias2: plan.f[PLAN_F * su + 2],
            first: 0u32,
        };
        if plan.f[PLAN_F * su + 4] > F::new(0.5) {
            rule.first = 1u32;
        }
        cube_gradient::<F>(points, &w, &mut red, &mut row, &walk, shape, pass);
        let mut q = t;
        while q < width {
            exchange.rows[(buf * cubes + c) * width + q].store(tagged::<F>(row[q], tag));
            q += units;
        }
        // This cube's columns: the same units read the same slots every step.
        let mut j = c;
        while j < width {
            let mut sum = F::new(0.0);
            let mut r = t;
            while r < cubes {
                let i = (buf * cubes + r) * width + j;
                sum += await_tagged::<F>(
                    &exchange.rows,
                    i,
                    tag,
                    spin_limit,
                    &exchange.status,
                    &mut flag,
                );
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
                exchange.totals[(buf * cubes + r) * width + j].store(tagged::<F>(tot, tag));
                r += units;
            }
            sync_cube();
            j += cubes;
        }
        let mut q = t;
        while q < width {
            let i = (buf * cubes + c) * width + q;
            let g = await_tagged::<F>(
                &exchange.totals,
                i,
                tag,
                spin_limit,
                &exchange.status,
                &mut flag,
            );
            if q == np {
                w[np] = g;
            } else {
                let pj = w[q];
                let mj = new_m::<F>(pj, g, ms[q], &rule, opt);
                let vj = new_v::<F>(pj, g, vs[q], &rule, opt);
                ms[q] = mj;
                vs[q] = vj;
                w[q] = new_p::<F>(pj, mj, vj, g, &rule, opt);
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
            state.params[k] = w[k];
            state.m[k] = ms[k];
            state.v[k] = vs[k];
            k += units;
        }
        if t == 0 {
            // w[np] holds the last step's loss.
            state.loss[0] = w[np];
            state.loss[1] = F::new(0.0);
            if exchange.status[0].load() != 0u32 {
                state.loss[1] = F::new(1.0);
            }
        }
    }
    rows::release::<F>(w);
    rows::release::<F>(ms);
    rows::release::<F>(vs);
    rows::release::<F>(row);
    rows::release::<F>(red);
    rows::release::<u32>(flag);
    rows::release::<F>(bcast);
}
