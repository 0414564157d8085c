//! How the tensor-core pass lays out a cube for a model — its tile, where the
//! hidden weights are read from, its units — and how many such cubes a
//! multiprocessor holds: the choice behind
//! [`crate::engine::fused::gpu::kernels::tensor::tensor_grad`]'s `Pass`.
//!
//! Shared memory holds every hidden layer's activations for a tile (the
//! backward pass needs them; the shared-output pass one set more, for the δ
//! going down) and, where they fit beside a tile, the
//! hidden-to-hidden weights for the whole launch. Where they do not (7 layers
//! of 128), the products read the weights from their half-precision copy in
//! global memory through the L1 cache (`streamed`): slower — 4 × 128 677 ms
//! against 497 ms resident on the H200 (docs/results/2026-12-01-h200/
//! plans-layout/) — but a model that would not run at all runs.
//!
//! The tile: 128 or 64 points if three cubes can then share a multiprocessor
//! (one computes while the others wait on loads), else the largest of 128 …
//! 16 that fits. A cube of a tile of 64 or fewer points that is alone on its
//! multiprocessor keeps its top layers' weight gradients in registers over
//! the launch (`held`; 256 units, up to 192 registers a unit for them)
//! instead of adding them into its partial row every tile: 4 × 128 299.7 →
//! 203.0 ms, 3 × 128 137.2 → 123.3 ms on an H100 (2026-12-06-h100/held-grads/);
//! Above 64 wide with three or more layers such a 64-point cube is taken
//! even where a larger tile or the strip pass would fit: 3 × 128 140.0 →
//! 118.6 ms (2026-12-06-h100/first-pairs/);
//! where they cannot be held, it takes 512 units instead of 256, so twice
//! the planes share its tile's work: 4 × 128 501.5 → 458.6 ms; with a
//! 128-point tile (2 × 128) 512 units were slower, 145 → 159 ms
//! (`plans-units/`), and holding its one layer gained nothing (75.0 → 74.0 ms).
//! The products run on registers (`kernels::mma_regs`) where the device has
//! manual MMA and `ldmatrix` for the operand type and the weights are in
//! shared memory (3 × 64 101.9 → 91.7 ms, 4 × 128 473 → 367 ms, `plans-regs/`),
//! else on `cmma` fragments (`kernels::mma`). `FERROFIT_TENSOR_PLAN` (`TILE[,streamed][,UNITS][,cmma][,strips][,held=N][,tile-sums]`,
//! e.g. `64,256,held=2`) overrides the choice where that layout fits, for A/B runs
//! on a device.

mod env;

use crate::engine::fused::gpu::kernels::colsums::Cols;
use crate::engine::fused::gpu::kernels::held;
use crate::engine::fused::gpu::kernels::mma::{row_stride, BLOCK, PLANE_UNITS};
use crate::engine::fused::gpu::kernels::ops::{cubes_by_shared, CUBE_UNITS};
use crate::engine::fused::gpu::kernels::strips::strip_rows;
use crate::engine::fused::gpu::kernels::tensor::shared_rows;
pub use crate::engine::fused::gpu::shape::Plan;
use crate::engine::fused::gpu::shape::{keeps_z, Shape};

/// 32-bit registers of one multiprocessor (every NVIDIA GPU since Kepler).
const REGISTERS_PER_SM: usize = 65_536;

/// Tile lengths the pass is compiled for, longest first.
const TILES: [usize; 4] = [128, 64, 32, 16];

/// Units of a cube that has its multiprocessor to itself.
const ALONE_UNITS: usize = 512;

/// Whether the tensor-core pass takes `s`: two or more hidden layers of a
/// width that is a multiple of [`BLOCK`] (16–128), an activation whose
/// derivative follows from its value.
pub fn takes(s: &Shape) -> bool {
    s.layers >= 2 && s.hidden.is_multiple_of(BLOCK) && s.hidden >= BLOCK && !keeps_z(s.act)
}

/// Shared-memory bytes of `plan` for `s`: the activations, the weights
/// unless streamed, the f32 inputs (and, in the shared-output pass, the
/// targets), a 16×16 f32 scratch a plane and a value a unit for the sums.
pub fn plan_bytes(s: &Shape, plan: &Plan) -> usize {
    let row = row_stride(s.hidden) * 2;
    let weights = if plan.streamed {
        0
    } else {
        (s.layers - 1) * s.hidden * row
    };
    let planes = plan.units / PLANE_UNITS as usize;
    // The strip pass keeps two δ rows and no last activations, and sums the
    // output layer's gradient through a row of the width a plane.
    let (rows, red, own) = if plan.strips {
        (strip_rows(s.layers), plan.units.max(planes * s.hidden), 0)
    } else {
        (shared_rows(s.layers), plan.units, plan.tile * s.outputs)
    };
    let f32s = plan.tile * s.inputs + own + planes * BLOCK * BLOCK + red;
    rows * plan.tile * row + weights + f32s * 4
}

/// Registers a unit of `tensor_grad` takes for `plan`, as Nsight Compute
/// read them on the H200 (sm_90; the runtime does not say,
/// docs/results/2026-12-01-h200/profile/, plans-regs/): on `cmma` fragments
/// 78–80 for widths up to 64, 128 above; on registers 128 for widths up to
/// 64 (124 before the output layer moved to `kernels::head`;
/// docs/results/2026-12-02-h200/ab-head/), 92 for 128 in cubes of 512 (read
/// before that move; their launch bound caps them at 128), and
/// for 128 in cubes of 256 the most a unit can have (255 with two layers' weight
/// gradients held, docs/results/2026-12-06-h100/held-grads/). Counting
/// more cubes than the registers hold launches a partial second wave: 4 a
/// multiprocessor by shared memory where 3 fit ran a third of the cubes after
/// the rest.
fn registers_per_unit(hidden: usize, plan: &Plan) -> usize {
    if plan.strips {
        // Nsight Compute: 110 at 3 × 64, 255 at 4 × 128 (`profile-strips/`).
        return if hidden <= 64 { 128 } else { 255 };
    }
    match (plan.regs, hidden <= 64) {
        (false, true) => 80,
        (false, false) => 128,
        (true, true) => 128,
        (true, false) if plan.units >= 512 => 92,
        (true, false) => 255,
    }
}

/// Cubes of `plan` one multiprocessor holds at once, by shared memory
/// (`per_sm_shared` bytes; 1 KiB of it the driver keeps per cube) and by
/// registers (0 when not one fits).
pub fn resident_cubes(s: &Shape, plan: &Plan, per_sm_shared: usize) -> usize {
    let by_shared = cubes_by_shared(plan_bytes(s, plan), per_sm_shared);
    let by_registers = REGISTERS_PER_SM / (registers_per_unit(s.hidden, plan) * plan.units);
    by_shared.min(by_registers)
}

/// The layout of the tensor-core pass for `s` with `max_shared` bytes of
/// shared memory a cube (None when not even a 16-point tile fits), on a
/// device with (`manual`) or without manual MMA and `ldmatrix`.
pub fn plan(s: &Shape, max_shared: usize, manual: bool) -> Option<Plan> {
    let p = env::overridden(s, max_shared, manual).or_else(|| chosen(s, max_shared, manual))?;
    Some(with_down_sums(s, p))
}

/// `p` with its bias and first-layer sums in the down products' epilogue
/// where its pass takes them: the shared-output pass on registers, its
/// items' sums within the scratch ([`Cols::fits`]). 4 × 128 154.0 → 136.3 ms,
/// 3 × 128 96.7 → 89.1 ms on an H100 (docs/PERFORMANCE.md, "Sums where the δ
/// is made").
fn with_down_sums(s: &Shape, p: Plan) -> Plan {
    let takes = p.regs && !p.strips && !p.streamed && Cols::new(s, p.tile, p.units).fits();
    Plan {
        down_sums: p.down_sums && takes,
        ..p
    }
}

/// The layout the pass takes for `s` when the environment names none.
fn chosen(s: &Shape, max_shared: usize, manual: bool) -> Option<Plan> {
    let shared = shared_plan(s, max_shared, manual)?;
    // A 64-point cube holding its gradients (module note); not timed at 64
    // wide, where the strips stay (3 × 64 44.7 ms), nor at 2 × 128.
    if s.hidden > 64 && s.layers >= 3 {
        let at64 = Plan {
            tile: 64,
            units: CUBE_UNITS as usize,
            held: 0,
            ..shared
        };
        if let Some(p) = holding(s, &at64, max_shared) {
            return Some(p);
        }
    }
    // Planes through every layer on their own where that keeps as many
    // planes at work on a multiprocessor.
    let warps = |p: &Plan| resident_planes(s, p, max_shared);
    Some(match strips_plan(s, max_shared, manual) {
        Some(p) if warps(&p) >= warps(&shared) => p,
        _ => shared,
    })
}

/// Planes of `plan` a multiprocessor holds at once.
fn resident_planes(s: &Shape, plan: &Plan, max_shared: usize) -> usize {
    resident_cubes(s, plan, max_shared) * plan.units / PLANE_UNITS as usize
}

/// The strip pass over tiles of `tile` points: 16 points a plane.
fn strips_of(tile: usize) -> Plan {
    Plan {
        tile,
        streamed: false,
        units: tile / BLOCK * PLANE_UNITS as usize,
        regs: true,
        strips: true,
        held: 0,
        down_sums: true,
    }
}

/// The plan of `kernels::strips` for `s` that keeps the most planes of a
/// multiprocessor at work (None without manual MMA or where none fits).
fn strips_plan(s: &Shape, max_shared: usize, manual: bool) -> Option<Plan> {
    let warps = |p: &Plan| resident_planes(s, p, max_shared);
    [8, 4]
        .map(|planes| strips_of(planes * BLOCK))
        .into_iter()
        .filter(|p| manual && warps(p) > 0)
        .max_by_key(|p| (warps(p), p.tile))
}

/// The layout of `kernels::tensor` (the planes sharing each product's output
/// blocks) for `s`.
fn shared_plan(s: &Shape, max_shared: usize, manual: bool) -> Option<Plan> {
    // `ldmatrix` reads shared memory only: streamed weights keep cmma.
    let at = |tile, streamed| Plan {
        tile,
        streamed,
        units: CUBE_UNITS as usize,
        regs: manual && !streamed,
        strips: false,
        held: 0,
        down_sums: true,
    };
    let fits = |p: &Plan, room: usize| plan_bytes(s, p) <= room;
    let tile = |streamed| {
        [128, 64]
            .map(|t| at(t, streamed))
            .into_iter()
            .find(|p| fits(p, max_shared / 3))
            .or_else(|| {
                TILES
                    .map(|t| at(t, streamed))
                    .into_iter()
                    .find(|p| fits(p, max_shared))
            })
    };
    let p = tile(false).or_else(|| tile(true))?;
    let alone = Plan {
        units: ALONE_UNITS,
        ..p
    };
    if let Some(held) = holding(s, &p, max_shared) {
        return Some(held);
    }
    let single = resident_cubes(s, &p, max_shared) <= 1 && p.tile <= 64;
    Some(if single && resident_cubes(s, &alone, max_shared) == 1 {
        alone
    } else {
        p
    })
}

/// `p` holding its top layers' weight gradients, where it can: a cube of
/// at most 64 points on registers, in shared memory, alone on its
/// multiprocessor, whose planes share a layer's gradient out evenly.
fn holding(s: &Shape, p: &Plan, max_shared: usize) -> Option<Plan> {
    let fits = plan_bytes(s, p) <= max_shared;
    let single = resident_cubes(s, p, max_shared) <= 1 && p.tile <= 64;
    let held = held_layers(s, p);
    (fits && single && p.regs && !p.streamed && !p.strips && held > 0)
        .then_some(Plan { held, ..*p })
}

/// Registers a unit may give to held weight gradients: three layers of 128
/// in cubes of 256 units (192) ran fastest, spills and all
/// (docs/results/2026-12-06-h100/held-grads/). Measured at 128 wide only:
/// for narrower plans (16 registers a layer at 64 wide) the same budget is
/// an extrapolation.
const HELD_REGISTERS: usize = 192;

/// The top hidden layers whose weight gradients the planes of `p` can keep
/// in registers over a launch (0 where a layer's split does not share out
/// evenly over them).
fn held_layers(s: &Shape, p: &Plan) -> usize {
    let a_layer = held::registers(s.hidden, p.units / PLANE_UNITS as usize, 1);
    if a_layer == 0 {
        return 0;
    }
    (s.layers - 1).min(HELD_REGISTERS / a_layer)
}

#[cfg(test)]
mod tests;
