//! How the tiled kernel ([`crate::engine::fused::gpu::kernels::tiled`])
//! shares out its layer products: the register [`Blocks`] of its units and
//! the units a cube, for a model, a tile of points and the compiler.
//! `FERROFIT_TILED_BLOCKS` names another choice, for measuring it.

use crate::engine::fused::gpu::kernels::lined;
use crate::engine::fused::gpu::kernels::tile::FULL_BLOCKS;
use crate::engine::fused::gpu::shape::{Blocks, Shape};

/// Whether the tiled kernel's hidden layers take the lined passes
/// (`kernels::lined`, 16-byte loads): on CUDA, without bounds checks (CubeCL
/// compiles vector views only in unchecked launches, and not to WGSL), for
/// hidden layers of a multiple of 4 units.
pub fn tiled_lines(s: &Shape, cuda: bool, checked: bool) -> bool {
    cuda && !checked && lined::fits(s.hidden)
}

/// The blocks for `s`'s model with tiles of `tile` points, on CUDA or not:
/// those `FERROFIT_TILED_BLOCKS` names where it parses, else as measured on
/// the H200 (docs/PERFORMANCE.md, "The tiled kernel's register blocks"):
/// - tiles of [`FULL_BLOCKS`] points or more on CUDA: 8 points × 4 units,
///   8 × 4 weight-gradient entries, and about one forward block a unit (the
///   forward blocks of a hidden layer rounded up to a power of two, 128 to
///   256 units a cube) — 3 × 64 345 → 325 ms, 4 × 128 2.54 → 2.44 s;
/// - elsewhere, 4 × 4 blocks and 256 units a cube (on Vulkan 8 × 4 blocks
///   ran 3 × 64 1.4× slower); tiles of fewer points take blocks of 2 points.
pub fn tiled_blocks(s: &Shape, tile: usize, cuda: bool, lined: bool) -> Blocks {
    let b = chosen(s, tile, cuda, lined);
    Blocks {
        lined,
        ..overridden().unwrap_or(b)
    }
}

/// [`tiled_blocks`] without the override.
fn chosen(s: &Shape, tile: usize, cuda: bool, lined: bool) -> Blocks {
    if tile < FULL_BLOCKS {
        return Blocks {
            points: 2,
            ..Blocks::default()
        };
    }
    if !cuda {
        return Blocks::default();
    }
    let (points, units) = (8, 4);
    // The lined passes' forward items: planes of 8 × 4 lanes, each lane
    // `points` points × 4 units.
    let forward = if lined {
        tile.div_ceil(8 * points) * s.hidden.div_ceil(16) * 32
    } else {
        tile.div_ceil(points) * s.hidden.div_ceil(units)
    };
    Blocks {
        points,
        units,
        grad_u: if lined { 4 } else { 8 },
        grad_k: if lined { 8 } else { 4 },
        cube: forward.next_power_of_two().clamp(128, 256),
        lined,
    }
}

/// The blocks `FERROFIT_TILED_BLOCKS` names, where it parses.
fn overridden() -> Option<Blocks> {
    let text = std::env::var("FERROFIT_TILED_BLOCKS").ok()?;
    let b = parse(&text);
    if b.is_none() {
        log::warn!(
            "FERROFIT_TILED_BLOCKS={text} is not POINTSxUNITS,GRAD_UxGRAD_K,CUBE \
             (blocks of 1, 2, 4 or 8; 32 to 256 units a cube, a power of two): ignored"
        );
    }
    b
}

/// `POINTSxUNITS,GRAD_UxGRAD_K,CUBE` (e.g. `8x4,8x4,128`) as blocks.
fn parse(text: &str) -> Option<Blocks> {
    let mut parts = text.split(',').map(str::trim);
    let pair = |p: Option<&str>| -> Option<(usize, usize)> {
        let (a, b) = p?.split_once('x')?;
        let side = |v: &str| {
            v.parse()
                .ok()
                .filter(|n: &usize| matches!(n, 1 | 2 | 4 | 8))
        };
        Some((side(a)?, side(b)?))
    };
    let (points, units) = pair(parts.next())?;
    let (grad_u, grad_k) = pair(parts.next())?;
    let cube = parts
        .next()?
        .parse()
        .ok()
        .filter(|c: &usize| c.is_power_of_two() && (32..=256).contains(c))?;
    parts.next().is_none().then_some(Blocks {
        points,
        units,
        grad_u,
        grad_k,
        cube,
        lined: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Activation, Loss, OptimizerKind};
    use crate::engine::fused::gpu::kernels::tile::tile_points;

    /// The H200's shared memory per cube (CUDA's opt-in maximum), in bytes.
    const H200: usize = 227 * 1024;

    fn relu(hidden: usize, layers: usize) -> Shape {
        Shape {
            inputs: 1,
            hidden,
            layers,
            outputs: 1,
            act: Activation::Relu,
            loss: Loss::Mse,
            opt: OptimizerKind::Sgd,
        }
    }

    #[test]
    fn a_named_choice_parses_and_a_bad_one_does_not() {
        let b = parse("8x4, 4x8, 128").unwrap();
        assert_eq!(
            (b.points, b.units, b.grad_u, b.grad_k, b.cube),
            (8, 4, 4, 8, 128)
        );
        for bad in [
            "8x4,4x8",
            "8x3,4x4,128",
            "8x4,4x4,96",
            "8x4,4x4,512",
            "4x4,4x4,256,1",
        ] {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn cuda_takes_one_block_of_8_points_a_unit_where_measured_fastest() {
        // The H200's scalar tiles (61 points at 3 × 64, 55 at 4 × 128).
        let (deep, wide) = (relu(64, 3), relu(128, 4));
        let t_deep = tile_points(&deep, H200, false);
        let t_wide = tile_points(&wide, H200, false);
        assert_eq!(tiled_blocks(&deep, t_deep, true, false).cube, 128);
        assert_eq!(tiled_blocks(&wide, t_wide, true, false).cube, 256);
        assert_eq!(tiled_blocks(&wide, t_wide, true, false).points, 8);
        assert_eq!(tiled_blocks(&deep, t_deep, false, false), Blocks::default());
        assert_eq!(tiled_blocks(&relu(128, 8), 27, true, false).points, 2);
    }

    #[test]
    fn lined_blocks_take_a_plane_of_lanes_for_each_16_units_of_64_points() {
        let (deep, wide) = (relu(64, 3), relu(128, 4));
        assert!(tiled_lines(&deep, true, false));
        assert!(
            !tiled_lines(&deep, true, true),
            "bounds checks take the scalar passes"
        );
        assert!(
            !tiled_lines(&deep, false, false),
            "WGSL has no vector views"
        );
        assert!(
            !tiled_lines(&relu(10, 3), true, false),
            "10 units make no lines"
        );
        let b = tiled_blocks(&deep, tile_points(&deep, H200, true), true, true);
        assert!(b.lined);
        assert_eq!((b.points, b.grad_u, b.grad_k, b.cube), (8, 4, 8, 128));
        let b = tiled_blocks(&wide, tile_points(&wide, H200, true), true, true);
        assert_eq!(b.cube, 256);
    }
}
