//! The argument groups the fused GPU kernels share, so each kernel and device
//! function takes a few named values instead of long positional lists:
//!
//! - [`Points`]: the training data (inputs, targets, a micro-batch's index list);
//! - [`Batch`]: a micro-batch (its first point and count, its gradient's scale);
//! - [`Walk`]: which points of a micro-batch one unit visits, and the scale of
//!   their gradient;
//! - [`State`]: the master weights, the optimizer moments and the loss slot;
//! - [`Rule`]: one optimizer step's scalars (learning rate, decay, bias corrections);
//! - [`Exchange`]: the persistent kernel's mailboxes and failure flag.
//!
//! The `…Launch` types CubeCL derives for them are what the host passes
//! ([`crate::engine::fused::gpu::launch`]).

use cubecl::prelude::*;

/// The training data on the device.
#[derive(CubeType, CubeLaunch)]
pub struct Points<F: Float> {
    /// Inputs, `n × inputs`.
    pub x: Array<F>,
    /// Targets, `n × outputs`.
    pub y: Array<F>,
    /// The micro-batch's point indices (a placeholder for range batches).
    pub idx: Array<u32>,
}

#[cube]
impl<F: Float> Points<F> {
    /// Index in the dataset of point `i` of the micro-batch from `start`.
    pub fn at(&self, start: u32, i: usize, #[comptime] use_idx: bool) -> usize {
        if use_idx {
            self.idx[i] as usize
        } else {
            start as usize + i
        }
    }

    /// Inputs and targets of dataset point `p` into slot `slot` of `xs` and
    /// `ys` (`xs[slot · inputs ..]`, `ys[slot · outputs ..]`).
    pub fn load(
        &self,
        xs: &mut Array<F>,
        ys: &mut Array<F>,
        p: usize,
        #[comptime] slot: usize,
        #[comptime] inputs: usize,
        #[comptime] outputs: usize,
    ) {
        #[unroll]
        for a in 0..inputs {
            xs[slot * inputs + a] = self.x[p * inputs + a];
        }
        #[unroll]
        for o in 0..outputs {
            ys[slot * outputs + o] = self.y[p * outputs + o];
        }
    }
}

/// A micro-batch: `count` points from `start` (or listed in the index list),
/// their gradient times `scale`.
#[derive(CubeType, CubeLaunch, Clone, Copy)]
pub struct Batch<F: Float + CubeElement> {
    /// First point of the micro-batch (or of its index list).
    pub start: u32,
    /// Points in it.
    pub count: u32,
    /// What each point's gradient is multiplied by (1 / points of the step).
    pub scale: F,
}

/// How a tile's inputs (or targets) sit in shared memory: `tile` rows of
/// `width` values (inputs, or outputs, a point), `stride` apart; `use_idx`:
/// the batch lists its points.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TileRows {
    /// Points a tile.
    pub tile: usize,
    /// Values a point: its inputs, or its targets.
    pub width: usize,
    /// Row stride in the tile buffer.
    pub stride: usize,
    /// Points come from the index list.
    pub use_idx: bool,
}

#[cube]
impl<F: Float + CubeElement> Points<F> {
    /// The inputs of the tile of `batch` from point `base` into `dst`, the
    /// cube's units sharing them out; points past the batch read zeros.
    pub fn load_tile(
        &self,
        dst: &mut SharedMemory<F>,
        batch: &Batch<F>,
        base: usize,
        #[comptime] rows: TileRows,
    ) {
        let inputs = comptime!(rows.width);
        let n = batch.count as usize;
        let mut e = UNIT_POS as usize;
        while e < comptime!(rows.tile * rows.width) {
            let t = e / inputs;
            let a = e % inputs;
            let mut v = F::new(0.0);
            if base + t < n {
                let p = self.at(batch.start, base + t, comptime!(rows.use_idx));
                v = self.x[p * inputs + a];
            }
            dst[t * comptime!(rows.stride) + a] = v;
            e += CUBE_DIM as usize;
        }
    }
}

/// Values each of `units` sharers holds of a tile of `tile` rows of `width`
/// ([`Points::tile_to_registers`]).
pub fn tile_share(tile: usize, width: usize, units: usize) -> usize {
    (tile * width).div_ceil(units)
}

#[cube]
impl<F: Float + CubeElement> Points<F> {
    /// Sharer `unit`'s share, of `units` sharing them out as
    /// [`Points::load_tile`]'s units do (a cube's units, or a plane's lanes
    /// for the plane's own rows), of the inputs — with `targets`, the
    /// targets — of the tile of `batch` from point `base`, into registers;
    /// points past the batch read zeros. Loaded a tile ahead, their latency
    /// is spent under the tile before; [`registers_to_tile`] stores them.
    #[allow(clippy::too_many_arguments)]
    pub fn tile_to_registers(
        &self,
        regs: &mut Array<F>,
        batch: &Batch<F>,
        base: usize,
        unit: usize,
        #[comptime] rows: TileRows,
        #[comptime] units: usize,
        #[comptime] targets: bool,
    ) {
        let width = comptime!(rows.width);
        let n = batch.count as usize;
        #[unroll]
        for k in 0..comptime!(tile_share(rows.tile, width, units)) {
            let e = unit + k * units;
            let mut v = F::new(0.0);
            if e < comptime!(rows.tile * width) && base + e / width < n {
                let p = self.at(batch.start, base + e / width, comptime!(rows.use_idx));
                if comptime!(targets) {
                    v = self.y[p * width + e % width];
                } else {
                    v = self.x[p * width + e % width];
                }
            }
            regs[k] = v;
        }
    }
}

/// The values [`Points::tile_to_registers`] loaded for sharer `unit`, into
/// the tile buffer `dst` from `at` (rows of `rows.stride`).
#[cube]
pub fn registers_to_tile<F: Float>(
    regs: &Array<F>,
    dst: &mut SharedMemory<F>,
    at: usize,
    unit: usize,
    #[comptime] rows: TileRows,
    #[comptime] units: usize,
) {
    let width = comptime!(rows.width);
    #[unroll]
    for k in 0..comptime!(tile_share(rows.tile, width, units)) {
        let e = unit + k * units;
        if e < comptime!(rows.tile * width) {
            dst[at + (e / width) * comptime!(rows.stride) + e % width] = regs[k];
        }
    }
}

/// The points one unit visits: `first, first + stride, …` below `count` of
/// the micro-batch starting at `start` (or listed in the index list); their
/// gradient is multiplied by `scale`.
#[derive(CubeType, Clone, Copy)]
pub struct Walk<F: Float> {
    /// First point of the micro-batch.
    pub start: u32,
    /// Points in it.
    pub count: u32,
    /// This unit's first point.
    pub first: usize,
    /// Distance to its next point.
    pub stride: usize,
    /// What each point's gradient is multiplied by.
    pub scale: F,
}

/// Master weights (`np`), moments (`np + 1` each) and the loss slot
/// (`[loss, 1 if a persistent launch failed]`).
#[derive(CubeType, CubeLaunch)]
pub struct State<F: Float> {
    /// Master weights (np).
    pub params: Array<F>,
    /// Momentum or Adam's first moments (np + 1).
    pub m: Array<F>,
    /// Adam's second moments (np + 1).
    pub v: Array<F>,
    /// `[loss, 1 if a persistent launch failed]`.
    pub loss: Array<F>,
}

/// One optimizer step's scalars: learning rate, weight decay, Adam's bias
/// corrections, and whether this is the optimizer's first step (not 0).
#[derive(CubeType, CubeLaunch, Clone, Copy)]
pub struct Rule<F: Float + CubeElement> {
    /// Learning rate.
    pub lr: F,
    /// Weight decay.
    pub wd: F,
    /// Adam's bias correction 1 - β1^t.
    pub bias1: F,
    /// Adam's bias correction 1 - β2^t.
    pub bias2: F,
    /// 1 on the optimizer's first step, else 0.
    pub first: u32,
}

/// The persistent kernel's exchange: every cube's published gradient row,
/// every cube's mailbox of totals (both double-buffered), and the status flag
/// a cube sets when it gives up waiting.
#[derive(CubeType, CubeLaunch)]
pub struct Exchange {
    /// Every cube's published gradient row (double-buffered).
    pub rows: Array<Atomic<u32>>,
    /// Every cube's mailbox of totals (double-buffered).
    pub totals: Array<Atomic<u32>>,
    /// Set by a cube that gave up waiting.
    pub status: Array<Atomic<u32>>,
}
