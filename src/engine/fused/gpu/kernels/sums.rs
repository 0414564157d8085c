//! The tensor-core pass's sums over a tile's points that are not matrix
//! products and not the output layer's (`head`): every hidden layer's bias
//! gradient and the first layer's weight gradient. All the cube's units share them:
//! with fewer entries than units each entry's points are split over
//! ⌊units / entries⌋ parts, else a unit takes several entries. Each unit keeps
//! its share in registers across every tile the cube takes, and the shares
//! are combined once, at the end ([`flush`]): no partial row traffic per tile.

use crate::engine::fused::gpu::kernels::mma::row_stride;
use crate::engine::fused::gpu::shape::Shape;
use cubecl::prelude::*;

/// Which sum: its entries and their term at point `t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `H` biases of one hidden layer (δ[t, j]).
    Bias,
    /// `H·I` weights of the first layer (δ_1[t, j]·x[t, a]).
    First,
}

/// A sum as compiled: its kind, the tile, the cube's units and the model's
/// widths.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sum {
    /// Which sum.
    pub kind: Kind,
    /// Points a tile.
    pub tile: usize,
    /// Units of the cube sharing it.
    pub units: usize,
    /// Inputs a point.
    pub inputs: usize,
    /// Width of the hidden layers.
    pub hidden: usize,
}

impl Sum {
    /// Sum `kind` of a model of shape `s` over tiles of `tile` points, shared
    /// by `units` units.
    pub fn of(kind: Kind, s: &Shape, tile: usize, units: usize) -> Sum {
        Sum {
            kind,
            tile,
            units,
            inputs: s.inputs,
            hidden: s.hidden,
        }
    }

    /// Entries of the sum.
    pub fn entries(&self) -> usize {
        match self.kind {
            Kind::Bias => self.hidden,
            Kind::First => self.hidden * self.inputs,
        }
    }

    /// Parts each entry's points are split into.
    pub fn parts(&self) -> usize {
        (self.units / self.entries()).max(1)
    }

    /// Entries each unit keeps.
    pub fn slots(&self) -> usize {
        self.entries().div_ceil(self.units)
    }
}

/// Adds this unit's share of sum `s` over the tile into `acc[slot0..]`:
/// `rows` are the activation (or δ) rows from `src`, `f32s` the output δs
/// (`Output`) or the inputs (`First`).
#[cube]
pub fn add_share<F: Float, E: Float>(
    acc: &mut Array<F>,
    slot0: usize,
    rows: &SharedMemory<E>,
    f32s: &SharedMemory<F>,
    src: usize,
    #[comptime] s: Sum,
) {
    let entries = comptime!(s.entries());
    let parts = comptime!(s.parts());
    let sh = comptime!(row_stride(s.hidden));
    let inputs = comptime!(s.inputs);
    let unit = UNIT_POS as usize;
    #[unroll]
    for k in 0..comptime!(s.slots()) {
        let mut e = unit + k * comptime!(s.units);
        let mut part = 0usize;
        if comptime!(parts > 1) {
            e = unit % entries;
            part = unit / entries;
        }
        if part < parts && e < entries {
            let mut sum = F::new(0.0);
            let mut t = part;
            while t < comptime!(s.tile) {
                if comptime!(s.kind == Kind::Bias) {
                    sum += F::cast_from(rows[src + t * sh + e]);
                } else {
                    sum += F::cast_from(rows[src + t * sh + e / inputs])
                        * f32s[t * inputs + e % inputs];
                }
                t += parts;
            }
            acc[slot0 + k] += sum;
        }
    }
}

/// Combines the units' shares of sum `s` (in `acc[slot0..]`) and writes the
/// totals to `partials[at..]`, through `red` (a value a unit). Every unit calls it.
#[cube]
pub fn flush<F: Float>(
    acc: &Array<F>,
    slot0: usize,
    red: &mut SharedMemory<F>,
    partials: &mut Array<F>,
    at: usize,
    #[comptime] s: Sum,
) {
    let entries = comptime!(s.entries());
    let parts = comptime!(s.parts());
    let unit = UNIT_POS as usize;
    if comptime!(parts > 1) {
        let mut v = F::new(0.0);
        if unit < comptime!(parts * entries) {
            v = acc[slot0];
        }
        red[unit] = v;
        sync_cube();
        if unit < entries {
            let mut total = F::new(0.0);
            #[unroll]
            for q in 0..parts {
                total += red[q * entries + unit];
            }
            partials[at + unit] = total;
        }
        sync_cube();
    } else {
        #[unroll]
        for k in 0..comptime!(s.slots()) {
            let e = unit + k * comptime!(s.units);
            if e < entries {
                partials[at + e] = acc[slot0 + k];
            }
        }
    }
}
