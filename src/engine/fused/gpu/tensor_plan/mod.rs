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
//! else on `cmma` fragments (`kernels::mma`). `FERROFIT_TENSOR_PLAN` (`TILE[,streamed][,UNITS][,cmma][,strips][,held=N]`,
//! e.g. `64,256,held=2`) overrides the choice where that layout fits, for A/B runs
//! on a device.

mod env;

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
    if let Some(p) = env::overridden(s, max_shared, manual) {
        return Some(p);
    }
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
mod tests {
    use super::*;
    use crate::config::{Activation, Loss, OptimizerKind};
    use crate::engine::fused::gpu::kernels::mma::group;

    fn shape(hidden: usize, layers: usize, act: Activation) -> Shape {
        Shape {
            inputs: 1,
            hidden,
            layers,
            outputs: 1,
            act,
            loss: Loss::Mse,
            opt: OptimizerKind::Sgd,
        }
    }

    /// The H200's shared memory per cube (opt-in maximum), in bytes.
    const H200: usize = 227 * 1024;

    #[test]
    fn deep_models_of_whole_blocks_take_the_tensor_cores() {
        assert!(takes(&shape(64, 3, Activation::Relu)));
        assert!(takes(&shape(16, 2, Activation::Tanh)));
        assert!(!takes(&shape(64, 1, Activation::Relu)), "one hidden layer");
        assert!(
            !takes(&shape(10, 3, Activation::Relu)),
            "not a multiple of 16"
        );
        assert!(!takes(&shape(64, 3, Activation::Gelu)), "gelu needs z");
    }

    #[test]
    fn tiles_leave_room_for_three_cubes_where_they_can() {
        let deep = shape(64, 3, Activation::Relu);
        let p = shared_plan(&deep, H200, true).unwrap();
        assert_eq!((p.tile, p.streamed, p.units), (64, false, 256));
        // 63.5 KiB a cube: three by shared memory; by registers three on
        // cmma fragments (80 a unit), two on registers (128).
        assert_eq!(resident_cubes(&deep, &p, H200), 2);
        let fragments = Plan { regs: false, ..p };
        assert_eq!(resident_cubes(&deep, &fragments, H200), 3);
        assert_eq!(
            shared_plan(&shape(16, 2, Activation::Relu), H200, true)
                .unwrap()
                .tile,
            128
        );
        // 4 × 128: the weights alone take 104 KiB; one cube of 64 points,
        // alone on its multiprocessor, so its planes hold the weight
        // gradients of all three hidden-to-hidden layers (64 registers each).
        let wide = plan(&shape(128, 4, Activation::Relu), H200, true).unwrap();
        assert_eq!((wide.tile, wide.streamed, wide.units), (64, false, 256));
        assert_eq!(wide.held, 3);
        // Without manual MMA (cmma fragments) nothing is held: 512 units.
        let frag = plan(&shape(128, 4, Activation::Relu), H200, false).unwrap();
        assert_eq!((frag.units, frag.held), (512, 0));
        // Six layers of 128 (16 points a tile): three held, within 192 registers.
        let six = plan(&shape(128, 6, Activation::Relu), H200, true).unwrap();
        assert_eq!((six.tile, six.held), (16, 3));
        // 2 × 128: one cube of 128 points keeps 256 units.
        let two = shared_plan(&shape(128, 2, Activation::Relu), H200, true).unwrap();
        assert_eq!((two.tile, two.units), (128, 256));
        // 8 × 128: seven layers of weights fit beside no tile; streamed.
        let deeper = plan(&shape(128, 8, Activation::Relu), H200, true).unwrap();
        assert!(deeper.streamed);
        // Nothing fits a tiny shared memory.
        assert_eq!(shared_plan(&deep, 4 * 1024, true), None);
        // A small shared memory: one cube.
        assert_eq!(resident_cubes(&deep, &p, 72 * 1024), 1);
    }

    #[test]
    fn streamed_weights_and_more_units_change_the_bytes() {
        let s = shape(64, 3, Activation::Relu);
        let base = Plan {
            tile: 64,
            streamed: false,
            units: 256,
            regs: true,
            strips: false,
            held: 0,
        };
        let streamed = Plan {
            streamed: true,
            ..base
        };
        let wider = Plan { units: 512, ..base };
        assert_eq!(
            plan_bytes(&s, &base) - plan_bytes(&s, &streamed),
            2 * 64 * 72 * 2
        );
        // Eight more planes' scratch and a value for each new unit.
        assert_eq!(
            plan_bytes(&s, &wider) - plan_bytes(&s, &base),
            (8 * 256 + 256) * 4
        );
        // 512 units of 128 registers: one cube a multiprocessor.
        assert_eq!(resident_cubes(&s, &wider, H200), 1);
        // 128 wide on registers in cubes of 256: counted as the most a unit
        // can have (not measured), so one cube.
        let wide = shape(128, 2, Activation::Relu);
        let p = Plan { tile: 32, ..base };
        assert!(cubes_by_shared(plan_bytes(&wide, &p), H200) > 1);
        assert_eq!(resident_cubes(&wide, &p, H200), 1);
    }

    #[test]
    fn planes_take_their_own_points_where_as_many_stay_at_work() {
        // 3 × 64: 8 planes of 16 points, two cubes a multiprocessor, as
        // many planes as the shared-output layout's.
        let deep = shape(64, 3, Activation::Relu);
        let p = plan(&deep, H200, true).unwrap();
        assert_eq!((p.tile, p.units, p.strips, p.regs), (128, 256, true, true));
        assert_eq!(resident_cubes(&deep, &p, H200), 2);
        // Activations of two layers and two δ rows, the weights, the f32s.
        assert_eq!(
            plan_bytes(&deep, &p),
            4 * 128 * 144 + 2 * 64 * 144 + (128 + 8 * 256 + 8 * 64) * 4
        );
        // Without manual MMA, the cmma layout.
        assert!(!plan(&deep, H200, false).unwrap().strips);
        // 4 × 128: four planes alone on a multiprocessor against sixteen.
        let wide = plan(&shape(128, 4, Activation::Relu), H200, true).unwrap();
        assert!(!wide.strips);
        // 3 × 128: as many planes either way; held gradients win at 128 wide.
        let three = plan(&shape(128, 3, Activation::Relu), H200, true).unwrap();
        assert_eq!((three.strips, three.tile, three.held), (false, 64, 2));
        // 2 × 128: the shared-output cube (128 points) holds nothing: strips.
        assert!(
            plan(&shape(128, 2, Activation::Relu), H200, true)
                .unwrap()
                .strips
        );
        assert_eq!(env::parse("64,strips").map(|p| p.strips), Some(true));
    }

    #[test]
    fn a_plane_groups_blocks_that_divide_the_row_and_leave_no_plane_idle() {
        // Rows of 8 blocks (128 wide) over 4 rows of blocks (64 points): 4.
        assert_eq!(group(8, 4, 8), 4);
        // 64 wide over 64 points: 4 a group would leave half the planes idle.
        assert_eq!(group(4, 4, 8), 2);
        assert_eq!(group(4, 8, 8), 4);
        assert_eq!(
            [1, 2, 3, 4, 5, 6, 7, 8].map(|b| group(b, 64, 8)),
            [1, 2, 1, 4, 1, 2, 1, 4]
        );
        assert_eq!(group(2, 2, 8), 1);
        // Sixteen planes: smaller groups, so that each has an item.
        assert_eq!(group(8, 4, 16), 2);
    }
}
