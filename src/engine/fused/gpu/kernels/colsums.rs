//! The bias and first-layer sums of the shared-output tensor-core pass
//! ([`crate::engine::fused::gpu::kernels::tensor`]), made where the δ they
//! sum is made: in the epilogue of the product going down
//! ([`crate::engine::fused::gpu::kernels::mma_regs::product`]), from the f32
//! accumulators, instead of read back from shared memory as half values
//! ([`crate::engine::fused::gpu::kernels::sums`]).
//!
//! A lane of an m16n8 accumulator holds two columns of two rows eight apart
//! ([`crate::engine::fused::gpu::kernels::mma_regs::position`]); over an
//! item of `rows × group` blocks it holds `4·group` columns (`values`), the
//! same for the eight lanes a column's rows are spread over (lane bits 2–4).
//! Each lane adds up its rows of each column, then three halving shuffles
//! (lane masks 16, 8, 4: the lane whose bit is set keeps the upper half)
//! leave it `kept` of those columns, summed over the item's rows: a register
//! or two a sum, kept over every tile the cube takes, for every hidden layer
//! but the top one (whose δ the output sweep makes) and, with `first`, the
//! first layer's weights (δ·x for each input). At the end of the launch the
//! items of one column (one a row of items) are added through shared memory
//! ([`flush`]).

use crate::engine::fused::gpu::kernels::mma::{origin, split_blocks, Split, BLOCK, PLANE_UNITS};
use crate::engine::fused::gpu::kernels::ops::scatter_level;
use crate::engine::fused::gpu::shape::{Pass, Shape};
use cubecl::prelude::*;

/// The most inputs whose first-layer weight sums are made in the epilogue
/// (a register set each); wider inputs keep [`crate::engine::fused::gpu::kernels::sums`].
pub const MAX_INPUTS: usize = 4;

/// How a pass's down products keep their column sums, at compile time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cols {
    /// Width of the hidden layers.
    pub hidden: usize,
    /// Hidden layers.
    pub layers: usize,
    /// Inputs a point.
    pub inputs: usize,
    /// Planes of the cube.
    pub planes: usize,
    /// The products' split of the tile's blocks over the planes.
    pub split: Split,
    /// The first layer's weight sums too (`inputs ≤ MAX_INPUTS`).
    pub first: bool,
}

impl Cols {
    /// The layout for `s` under `pass`, where its plan takes it.
    pub fn of(s: &Shape, pass: &Pass) -> Option<Cols> {
        let plan = pass.tensor?;
        plan.down_sums.then(|| Cols::new(s, plan.tile, plan.units))
    }

    /// The layout for `s` over tiles of `tile` points in cubes of `units`.
    pub fn new(s: &Shape, tile: usize, units: usize) -> Cols {
        let planes = units / PLANE_UNITS as usize;
        Cols {
            hidden: s.hidden,
            layers: s.layers,
            inputs: s.inputs,
            planes,
            split: split_blocks(s.hidden / BLOCK, tile / BLOCK, planes),
            first: s.inputs <= MAX_INPUTS,
        }
    }

    /// Whether the items' sums of a tile fit the pass's f32 scratch
    /// (`planes` 16×16 blocks) for [`flush`].
    pub fn fits(&self) -> bool {
        self.row_items() * self.hidden <= self.planes * BLOCK * BLOCK
    }

    /// Rows of items in a tile (items of one column).
    pub fn row_items(&self) -> usize {
        self.split.items / self.split.per_row
    }

    /// Columns a lane holds of an item: two of each m16n8 tile.
    pub fn values(&self) -> usize {
        4 * self.split.group
    }

    /// Of those, the sums a lane keeps after the halving shuffles.
    pub fn kept(&self) -> usize {
        (self.values() / 8).max(1)
    }

    /// Items each plane takes (some planes one fewer).
    pub fn per_plane(&self) -> usize {
        self.split.items.div_ceil(self.planes)
    }

    /// Sums kept: the bias of every hidden layer but the top one, then the
    /// first layer's weights for each input.
    pub fn sets(&self) -> usize {
        self.layers - 1 + if self.first { self.inputs } else { 0 }
    }

    /// Registers a unit keeps them in (at least one).
    pub fn slots(&self) -> usize {
        (self.sets() * self.per_plane() * self.kept()).max(1)
    }
}

/// Halves `v` (the lane's `values` column sums) over lane bits 4, 3 and 2
/// as far as it holds values to halve: after it `v[0..kept]` holds the
/// lane's share summed over the eight lanes of its columns (for four
/// values, over the four lanes of bits 4 and 3).
#[cube]
pub fn scatter<F: Float>(v: &mut Array<F>, lane: usize, #[comptime] values: usize) {
    scatter_level::<F>(v, lane, comptime!(values / 2), 16usize);
    scatter_level::<F>(v, lane, comptime!(values / 4), 8usize);
    if comptime!(values >= 8) {
        scatter_level::<F>(v, lane, comptime!(values / 8), 4usize);
    }
}

/// Which of the item's columns (from its first) kept sum `r` of `lane`
/// is: value `j` of a lane is column `(j / 2)·8 + (lane % 4)·2 + j % 2`,
/// and each halving keeps the upper half where the lane's bit is set.
#[cube]
pub fn column(lane: usize, r: usize, #[comptime] values: usize) -> usize {
    // (Four values are halved twice: the last term is then zero.)
    let j = r
        + ((lane / 16usize) % 2usize) * comptime!(values / 2)
        + ((lane / 8usize) % 2usize) * comptime!(values / 4)
        + ((lane / 4usize) % 2usize) * comptime!(values / 8);
    (j / 2usize) * 8usize + (lane % 4usize) * 2usize + j % 2usize
}

/// Adds the item's column sums `cs` (`values` of them, this lane's) into
/// sum `set` of `kept` for the plane's item `j`, after halving them.
#[cube]
pub fn keep<F: Float>(
    kept: &mut Array<F>,
    cs: &mut Array<F>,
    set: usize,
    j: usize,
    #[comptime] c: Cols,
) {
    let (per_plane, kept_n) = comptime!((c.per_plane(), c.kept()));
    let lane = (UNIT_POS % PLANE_UNITS) as usize;
    scatter::<F>(cs, lane, comptime!(c.values()));
    #[unroll]
    for s in 0..comptime!(c.sets()) {
        #[unroll]
        for jj in 0..per_plane {
            if s == set && jj == j {
                #[unroll]
                for r in 0..kept_n {
                    kept[comptime!((s * per_plane + jj) * kept_n + r)] += cs[r];
                }
            }
        }
    }
}

/// Offset of sum `set`'s first entry in a cube's partial row, and the
/// step between its entries.
pub fn place(c: &Cols, set: usize) -> (usize, usize) {
    let (h, i) = (c.hidden, c.inputs);
    let off1 = h * i + h;
    match set {
        0 => (h * i, 1),
        s if s < c.layers - 1 => (off1 + (s - 1) * (h * h + h) + h * h, 1),
        s => (s - (c.layers - 1), i),
    }
}

/// Writes every kept sum into the cube's partial `row` of `partials`: the
/// items of a column added through `scr` (every unit calls it; a cube
/// barrier before and after).
#[cube]
pub fn flush<F: Float>(
    kept: &Array<F>,
    scr: &mut SharedMemory<F>,
    partials: &mut Array<F>,
    row: usize,
    #[comptime] c: Cols,
) {
    let (per_plane, kept_n, values) = comptime!((c.per_plane(), c.kept(), c.values()));
    let (hidden, planes, sp) = comptime!((c.hidden, c.planes, c.split));
    let unit = UNIT_POS as usize;
    let plane = (UNIT_POS / PLANE_UNITS) as usize;
    let lane = (UNIT_POS % PLANE_UNITS) as usize;
    #[unroll]
    for s in 0..comptime!(c.sets()) {
        #[unroll]
        for j in 0..per_plane {
            let b = plane + j * planes;
            if b < comptime!(sp.items) {
                let (m0, n_first) = origin(b, sp);
                let ri = m0 / comptime!(sp.rows * BLOCK);
                #[unroll]
                for r in 0..kept_n {
                    let mut v = kept[comptime!((s * per_plane + j) * kept_n + r)];
                    if comptime!(values < 8) {
                        // Four values halved twice: lanes 4 apart hold
                        // other rows of the same columns.
                        v += plane_shuffle_xor(v, 4u32);
                    }
                    let mut write = true;
                    if comptime!(values < 8) {
                        write = (lane & 4usize) == 0usize;
                    }
                    if write {
                        scr[ri * hidden + n_first + column(lane, r, values)] = v;
                    }
                }
            }
        }
        sync_cube();
        let (at, step) = comptime!(place(&c, s));
        let mut u = unit;
        while u < hidden {
            let mut total = F::new(0.0);
            #[unroll]
            for ri in 0..comptime!(c.row_items()) {
                total += scr[ri * hidden + u];
            }
            partials[row + at + u * step] = total;
            u += CUBE_DIM as usize;
        }
        sync_cube();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Activation;

    fn shape(inputs: usize, hidden: usize, layers: usize) -> Shape {
        Shape::mse_sgd((inputs, 1), hidden, layers, Activation::Relu)
    }

    /// The host's mirror of [`column`] and [`scatter`]: which column each
    /// (lane, kept) pair ends with.
    fn host_column(lane: usize, r: usize, values: usize) -> usize {
        let mut j = r;
        let halves = [(16, values / 2), (8, values / 4), (4, values / 8)];
        for (bit, half) in halves {
            if half >= 1 && lane & bit != 0 {
                j += half;
            }
        }
        (j / 2) * 8 + (lane % 4) * 2 + j % 2
    }

    #[test]
    fn every_column_of_an_item_is_kept_by_one_lane() {
        for group in [1, 2, 4] {
            let values = 4 * group;
            let kept = (values / 8).max(1);
            let mut seen = vec![0; 16 * group];
            for lane in 0..32 {
                // Four values: lanes with bit 2 set hold duplicates (added
                // by the flush's shuffle), not written.
                if values < 8 && lane & 4 != 0 {
                    continue;
                }
                for r in 0..kept {
                    seen[host_column(lane, r, values)] += 1;
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "group {group}: {seen:?}");
        }
    }

    #[test]
    fn the_sums_of_4x128_take_four_registers_and_fit_the_scratch() {
        let c = Cols::new(&shape(1, 128, 4), 64, 256);
        assert_eq!((c.split.rows, c.split.group), (2, 2));
        assert_eq!((c.values(), c.kept(), c.per_plane()), (8, 1, 1));
        assert_eq!((c.sets(), c.slots(), c.row_items()), (4, 4, 2));
        assert!(c.fits());
        // Wider inputs keep the shared-memory sums for the first layer.
        let wide = Cols::new(&shape(5, 128, 4), 64, 256);
        assert!(!wide.first);
        assert_eq!(wide.sets(), 3);
    }

    #[test]
    fn each_sum_lands_where_the_partial_row_keeps_it() {
        // 2 inputs, 3 layers of 16: W1 (32) b1 (16) W2 (256) b2 (16) W3 b3.
        let c = Cols::new(&shape(2, 16, 3), 64, 256);
        assert_eq!(place(&c, 0), (32, 1));
        assert_eq!(place(&c, 1), (48 + 256, 1));
        assert_eq!(place(&c, 2), (0, 2));
        assert_eq!(place(&c, 3), (1, 2));
        assert_eq!(c.sets(), 4);
    }
}
