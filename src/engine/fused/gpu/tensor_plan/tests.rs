//! The tensor-core plans chosen for model shapes and devices.

use super::*;
use crate::config::Activation;
use crate::engine::fused::gpu::kernels::mma::group;

fn shape(hidden: usize, layers: usize, act: Activation) -> Shape {
    Shape::mse_sgd((1, 1), hidden, layers, act)
}

use crate::engine::fused::gpu::limits::SM90_SHARED as H200;

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
        down_sums: true,
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

#[test]
fn the_shared_output_pass_on_registers_makes_its_sums_in_the_down_products() {
    let relu = Activation::Relu;
    let wide = plan(&shape(128, 4, relu), H200, true).unwrap();
    assert!(wide.down_sums);
    // The strip pass (3 × 64), cmma fragments and streamed weights keep
    // the sums over the δ rows.
    assert!(!plan(&shape(64, 3, relu), H200, true).unwrap().down_sums);
    assert!(!plan(&shape(128, 4, relu), H200, false).unwrap().down_sums);
    assert!(!plan(&shape(128, 8, relu), H200, true).unwrap().down_sums);
    // Named in the environment's words: on unless `tile-sums`.
    let p = |text| with_down_sums(&shape(128, 4, relu), env::parse(text).unwrap());
    assert!(p("64,256,held=3").down_sums);
    assert!(!p("64,256,held=3,tile-sums").down_sums);
}
