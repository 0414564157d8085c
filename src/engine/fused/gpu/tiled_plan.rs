//! How the tiled kernel ([`crate::engine::fused::gpu::kernels::tiled`])
//! shares out its layer products: the register [`Blocks`] of its units and
//! the units a cube, for a model and a tile of points. `FERROFIT_TILED_BLOCKS`
//! names another choice, for measuring it.

use crate::engine::fused::gpu::kernels::tiled::{cube_bytes, FULL_BLOCKS};
use crate::engine::fused::gpu::shape::{Blocks, Shape};

/// The blocks for `s`'s model with tiles of `tile` points on a device of
/// `max_shared` bytes of shared memory a cube: those `FERROFIT_TILED_BLOCKS`
/// names where it parses, else 4 (2 in tiles of fewer than [`FULL_BLOCKS`]
/// points) points × 4 units, 4 × 4 weight-gradient entries, 256 units a
/// cube; each layer's weights staged in shared memory where they fit beside
/// the tile (and the override does not say `global`).
pub fn tiled_blocks(s: &Shape, tile: usize, max_shared: usize) -> Blocks {
    let (named, staging) = overridden().unwrap_or((
        Blocks {
            points: if tile >= FULL_BLOCKS { 4 } else { 2 },
            ..Blocks::default()
        },
        true,
    ));
    Blocks {
        staged: staging && cube_bytes(s, tile, true) <= max_shared,
        ..named
    }
}

/// The blocks `FERROFIT_TILED_BLOCKS` names, where it parses, and whether
/// it lets the weights be staged.
fn overridden() -> Option<(Blocks, bool)> {
    let text = std::env::var("FERROFIT_TILED_BLOCKS").ok()?;
    let b = parse(&text);
    if b.is_none() {
        log::warn!(
            "FERROFIT_TILED_BLOCKS={text} is not POINTSxUNITS,GRAD_UxGRAD_K,CUBE[,global] \
             (blocks of 1, 2, 4 or 8; 32 to 256 units a cube, a power of two): ignored"
        );
    }
    b
}

/// `POINTSxUNITS,GRAD_UxGRAD_K,CUBE[,global]` (e.g. `8x4,8x4,128`) as
/// blocks, and whether the weights may be staged (not with `global`).
fn parse(text: &str) -> Option<(Blocks, bool)> {
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
    let staging = match parts.next() {
        None => true,
        Some("global") => false,
        Some(_) => return None,
    };
    let b = Blocks {
        points,
        units,
        grad_u,
        grad_k,
        cube,
        staged: false,
    };
    parts.next().is_none().then_some((b, staging))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_choice_parses_and_a_bad_one_does_not() {
        let (b, staging) = parse("8x4, 4x8, 128").unwrap();
        assert_eq!(
            (b.points, b.units, b.grad_u, b.grad_k, b.cube),
            (8, 4, 4, 8, 128)
        );
        assert!(staging);
        assert!(!parse("4x4,4x4,256,global").unwrap().1);
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
}
