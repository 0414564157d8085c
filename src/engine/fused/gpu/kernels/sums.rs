//! The tensor-core pass's sums over a tile's points that are not matrix
//! products and not the output layer's (`head`): every hidden layer's bias
//! gradient and the first layer's weight gradient. All the cube's units share them:
//! with fewer entries than units each entry's points are split over
//! ⌊units / entries⌋ parts, else a unit takes several entries. Each unit keeps
//! its share in registers across every tile the cube takes, and the shares
//! are combined once, at the end ([`flush`]): no partial row traffic per tile.
//! Where the entries are neighbouring units of one row (the biases; the first
//! layer's weights of a one-input model) a unit takes two of them and reads
//! both with one four-byte load: half the shared-memory loads and their
//! address arithmetic (CubeCL's indices are unsigned, so the compiler cannot
//! fold a constant offset into the load and computes every address anew).
//! Not in SPIR-V (`Pass::spirv`): CubeCL lowers a vector view of shared
//! memory there to a scalar load it then takes components of — a module
//! the validator rejects and NVIDIA's driver crashes on — so the entries are
//! read one by one.

use crate::engine::fused::gpu::kernels::mma::row_stride;
use crate::engine::fused::gpu::shape::{Pass, Shape};
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
    /// Compiled to SPIR-V (`Pass::spirv`): no pair is read as one vector.
    pub spirv: bool,
}

impl Sum {
    /// Sum `kind` of a model of shape `s` over the tiles of `pass`, shared
    /// by `units` units.
    pub fn of(kind: Kind, s: &Shape, pass: &Pass, units: usize) -> Sum {
        Sum {
            kind,
            tile: pass.tile,
            units,
            inputs: s.inputs,
            hidden: s.hidden,
            spirv: pass.spirv,
        }
    }

    /// Entries of the sum.
    pub fn entries(&self) -> usize {
        match self.kind {
            Kind::Bias => self.hidden,
            Kind::First => self.hidden * self.inputs,
        }
    }

    /// Neighbouring entries a unit takes together, read as one vector: 2
    /// where the entries are units of one row (even widths) outside SPIR-V,
    /// else 1.
    pub fn width(&self) -> usize {
        let row = self.kind == Kind::Bias || self.inputs == 1;
        if !self.spirv && row && self.hidden.is_multiple_of(2) {
            2
        } else {
            1
        }
    }

    /// Groups of [`Sum::width`] entries.
    pub fn groups(&self) -> usize {
        self.entries() / self.width()
    }

    /// Parts each group's points are split into.
    pub fn parts(&self) -> usize {
        (self.units / self.groups()).max(1)
    }

    /// Entries each unit keeps (a multiple of the width); a sum's place `i`
    /// in an accumulator array is its slots `i·slots()..`.
    pub fn slots(&self) -> usize {
        self.groups().div_ceil(self.units) * self.width()
    }
}

/// Adds this unit's share of sum `s` over the tile into its slots of sum
/// `which` in `acc`: `rows` are the activation (or δ) rows from `src`, `f32s`
/// the inputs (`First`).
#[cube]
pub fn add_share<F: Float, E: Float>(
    acc: &mut Array<F>,
    which: usize,
    rows: &SharedMemory<E>,
    f32s: &SharedMemory<F>,
    src: usize,
    #[comptime] s: Sum,
) {
    let (groups, parts, width) = comptime!((s.groups(), s.parts(), s.width()));
    let sh = comptime!(row_stride(s.hidden));
    let inputs = comptime!(s.inputs);
    let unit = UNIT_POS as usize;
    let slot0 = which * comptime!(s.slots());
    #[unroll]
    for k in 0..comptime!(s.slots() / width) {
        let mut g = unit + k * comptime!(s.units);
        let mut part = 0usize;
        if comptime!(parts > 1) {
            g = unit % groups;
            part = unit / groups;
        }
        if part < parts && g < groups {
            if comptime!(width == 2) {
                // Rows and `src` are even (row_stride is), so pairs align.
                let pairs = rows
                    .to_slice()
                    .into_vectorized()
                    .with_vector_size::<Const<2>>();
                let (mut s0, mut s1) = (F::new(0.0), F::new(0.0));
                let mut at = (src + part * sh) / 2usize + g;
                let mut t = part;
                while t < comptime!(s.tile) {
                    let v = pairs[at];
                    if comptime!(s.kind == Kind::First) {
                        let x = f32s[t];
                        s0 += F::cast_from(v[0]) * x;
                        s1 += F::cast_from(v[1]) * x;
                    } else {
                        s0 += F::cast_from(v[0]);
                        s1 += F::cast_from(v[1]);
                    }
                    at += comptime!(parts * sh / 2);
                    t += parts;
                }
                acc[slot0 + 2usize * k] += s0;
                acc[slot0 + 2usize * k + 1usize] += s1;
            } else {
                let mut sum = F::new(0.0);
                let mut t = part;
                while t < comptime!(s.tile) {
                    if comptime!(s.kind == Kind::Bias) {
                        sum += F::cast_from(rows[src + t * sh + g]);
                    } else {
                        sum += F::cast_from(rows[src + t * sh + g / inputs])
                            * f32s[t * inputs + g % inputs];
                    }
                    t += parts;
                }
                acc[slot0 + k] += sum;
            }
        }
    }
}

/// Combines the units' shares of sum `s` (their slots of sum `which` in `acc`)
/// and writes the totals to `partials[at..]`, through `red` (a value a
/// unit). Every unit calls it.
#[cube]
pub fn flush<F: Float>(
    acc: &Array<F>,
    which: usize,
    red: &mut SharedMemory<F>,
    partials: &mut Array<F>,
    at: usize,
    #[comptime] s: Sum,
) {
    let (groups, parts, width) = comptime!((s.groups(), s.parts(), s.width()));
    let unit = UNIT_POS as usize;
    let slot0 = which * comptime!(s.slots());
    if comptime!(parts > 1) {
        #[unroll]
        for v in 0..width {
            let mut x = F::new(0.0);
            if unit < comptime!(parts * groups) {
                x = acc[slot0 + v];
            }
            red[unit] = x;
            sync_cube();
            if unit < groups {
                let mut total = F::new(0.0);
                #[unroll]
                for q in 0..parts {
                    total += red[q * groups + unit];
                }
                partials[at + unit * width + v] = total;
            }
            sync_cube();
        }
    } else {
        #[unroll]
        for k in 0..comptime!(s.slots() / width) {
            let g = unit + k * comptime!(s.units);
            if g < groups {
                #[unroll]
                for v in 0..width {
                    partials[at + g * width + v] = acc[slot0 + k * width + v];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(kind: Kind, inputs: usize, hidden: usize, units: usize) -> Sum {
        Sum {
            kind,
            tile: 128,
            units,
            inputs,
            hidden,
            spirv: false,
        }
    }

    #[test]
    fn rows_of_units_are_read_in_pairs_and_every_entry_has_a_slot() {
        let b = sum(Kind::Bias, 1, 128, 256);
        assert_eq!((b.width(), b.groups(), b.parts(), b.slots()), (2, 64, 4, 2));
        let f = sum(Kind::First, 3, 64, 256);
        assert_eq!(
            (f.width(), f.groups(), f.parts(), f.slots()),
            (1, 192, 1, 1)
        );
        let narrow = sum(Kind::Bias, 1, 10, 64);
        assert_eq!(
            (narrow.width(), narrow.groups(), narrow.parts()),
            (2, 5, 12)
        );
        for s in [
            b,
            f,
            narrow,
            sum(Kind::Bias, 2, 128, 64),
            sum(Kind::First, 5, 64, 128),
        ] {
            // Every entry is some unit's: groups split over parts, or units
            // each taking `slots` entries.
            let covered = if s.parts() > 1 {
                s.groups() * s.width()
            } else {
                s.units * s.slots()
            };
            assert!(covered >= s.entries(), "{s:?}");
            assert_eq!(s.slots() % s.width(), 0);
        }
    }

    #[test]
    fn spirv_reads_one_entry_at_a_time() {
        let pass = Pass {
            tile: 128,
            spirv: true,
            ..Pass::default()
        };
        let mut shape = Shape::of(&crate::config::TrainConfig::default());
        (shape.inputs, shape.hidden) = (1, 64);
        let b = Sum::of(Kind::Bias, &shape, &pass, 256);
        assert_eq!((b.width(), b.groups(), b.parts(), b.slots()), (1, 64, 4, 1));
        let cuda = Sum::of(
            Kind::Bias,
            &shape,
            &Pass {
                spirv: false,
                ..pass
            },
            256,
        );
        assert_eq!(cuda.width(), 2);
    }
}
