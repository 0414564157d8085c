//! Weight gradients held in registers over a whole launch. The shared-output
//! tensor-core pass ([`crate::engine::fused::gpu::kernels::tensor`]) adds a
//! layer's weight gradient of each tile into the cube's partial row in
//! device memory — a 16×16 block through the plane's scratch, read, added,
//! written, every tile. For the top `held` hidden layers of a plan
//! ([`crate::engine::fused::gpu::shape::Plan::held`]) each plane keeps its
//! share of the gradient in its accumulator registers from the first tile
//! to the last instead, and writes it into the partial row once, at the end
//! of the launch. Each plane always takes the same items of the layer's
//! [`grad_split`], so the split must give every plane as many.

use crate::engine::fused::gpu::kernels::layers::{At, Layer};
use crate::engine::fused::gpu::kernels::mma::{origin, BLOCK, PLANE_UNITS};
use crate::engine::fused::gpu::kernels::mma_regs::{
    grad_item, grad_split, position, Pairs, TILE_N,
};
use cubecl::prelude::*;

/// 16×16 blocks of a layer's weight gradient (`hidden` wide) one plane of
/// `planes` holds, or None where the split gives the planes unequal shares.
pub fn blocks_a_plane(hidden: usize, planes: usize) -> Option<usize> {
    let sp = grad_split(hidden, planes);
    sp.items
        .is_multiple_of(planes)
        .then_some(sp.items / planes * sp.rows * sp.group)
}

/// f32 registers a unit takes to hold `held` layers' weight gradients.
pub fn registers(hidden: usize, planes: usize, held: usize) -> usize {
    // A 16×16 block is 256 values over a plane's 32 lanes.
    blocks_a_plane(hidden, planes).unwrap_or(0) * held * 8
}

/// Adds this tile's weight gradient of one held layer into `kept` from
/// block `from`: δ rows at `at.dst`, the activations below at `at.src`.
#[cube]
pub fn add_tile<F: Float, E: Float>(
    acts: &SharedMemory<E>,
    kept: &mut Sequence<Pairs<F>>,
    at: &At,
    #[comptime] from: usize,
    #[comptime] layer: Layer,
    #[comptime] planes: usize,
) {
    let sp = comptime!(grad_split(layer.out_w, planes));
    let (per_item, per_plane) = comptime!((sp.rows * sp.group, sp.items / planes));
    let plane = (UNIT_POS / PLANE_UNITS) as usize;
    let source = acts.to_slice();
    #[unroll]
    for j in 0..per_plane {
        let (m0, n_first) = origin(plane + j * planes, sp);
        let at_item = comptime!(from + j * per_item);
        grad_item::<F, E>(&source, kept, at, m0, n_first, at_item, sp, layer);
    }
}

/// Writes one held layer's weight gradient, blocks from `from` of `kept`,
/// into `partials` at `at` (rows of `hidden`), straight from the registers:
/// once a launch, so its scattered stores cost nothing that matters.
#[cube]
pub fn flush<F: Float>(
    kept: &Sequence<Pairs<F>>,
    partials: &mut Array<F>,
    at: usize,
    #[comptime] from: usize,
    #[comptime] hidden: usize,
    #[comptime] planes: usize,
) {
    let sp = comptime!(grad_split(hidden, planes));
    let (rg, g, per_plane) = comptime!((sp.rows, sp.group, sp.items / planes));
    let plane = (UNIT_POS / PLANE_UNITS) as usize;
    let (row, col) = position((UNIT_POS % PLANE_UNITS) as usize);
    #[unroll]
    for j in 0..per_plane {
        let (m0, n_first) = origin(plane + j * planes, sp);
        #[unroll]
        for i in 0..rg {
            #[unroll]
            for q in 0..comptime!(2 * g) {
                let acc = kept.index(2usize * (from + (j * rg + i) * g) + q);
                let n = n_first + q * TILE_N + col;
                #[unroll]
                for h in 0..2usize {
                    let m = m0 + i * BLOCK + row + h * 8usize;
                    let v = acc[h];
                    partials[at + m * hidden + n] = v[0];
                    partials[at + m * hidden + n + 1usize] = v[1];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fused::gpu::kernels::mma::{split_blocks, Split};

    #[test]
    fn items_of_two_rows_load_fewer_operands_where_every_plane_keeps_one() {
        // 128 wide over 64 points, 8 planes: 2 × 2 blocks an item (4
        // fragments for 8 products, against 5 for 8 in a row of 4).
        let fwd = split_blocks(8, 4, 8);
        assert_eq!((fwd.rows, fwd.group, fwd.items), (2, 2, 8));
        // Sixteen planes: only one row of two each.
        assert_eq!(
            (split_blocks(8, 4, 16).rows, split_blocks(8, 4, 16).group),
            (1, 2)
        );
        // A 128 × 128 weight gradient: 2 × 4 for 8 planes, 2 × 2 for 16.
        let g8 = split_blocks(8, 8, 8);
        assert_eq!((g8.rows, g8.group, g8.items, g8.per_row), (2, 4, 8, 2));
        assert_eq!(
            split_blocks(8, 8, 16),
            Split {
                rows: 2,
                group: 2,
                per_row: 4,
                items: 16
            }
        );
    }

    #[test]
    fn a_held_gradient_needs_equal_shares_and_counts_its_registers() {
        // 128 wide: 8 blocks a plane of 8 (64 registers a layer), 4 of 16.
        assert_eq!(blocks_a_plane(128, 8), Some(8));
        assert_eq!(registers(128, 8, 2), 128);
        assert_eq!(blocks_a_plane(128, 16), Some(4));
        // 48 wide: 9 blocks do not share out over 8 planes.
        assert_eq!(blocks_a_plane(48, 8), None);
        assert_eq!(registers(48, 8, 3), 0);
        // 16 wide: one block, most planes without.
        assert_eq!(blocks_a_plane(16, 8), None);
    }
}
