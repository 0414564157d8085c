//! `FERROFIT_TILED_BLOCKS`: the tiled kernel's blocks, units a cube and
//! tile named in the environment (`POINTSxUNITS,GRAD_UxGRAD_K,CUBE[,TILE]`,
//! e.g. `8x4,8x4,128`) instead of the ones [`super::tiled_layout`] chooses —
//! for measuring them on a device (`benches/device/run.sh blocks`).

use crate::engine::fused::gpu::kernels::tile::MAX_TILE;
use crate::engine::fused::gpu::shape::Blocks;

/// What `FERROFIT_TILED_BLOCKS` names: blocks and, optionally, the tile.
pub(super) struct Override {
    pub(super) blocks: Blocks,
    pub(super) tile: Option<usize>,
}

/// The choice `FERROFIT_TILED_BLOCKS` names, where it parses.
pub(super) fn overridden() -> Option<Override> {
    let text = std::env::var("FERROFIT_TILED_BLOCKS").ok()?;
    let o = parse(&text);
    if o.is_none() {
        log::warn!(
            "FERROFIT_TILED_BLOCKS={text} is not POINTSxUNITS,GRAD_UxGRAD_K,CUBE[,TILE] \
             (blocks of 1 to 8 points and 1, 2, 4 or 8 units; weight-gradient blocks of 1, 2, 4, \
             8 or 16; 32 to 1024 units a cube, a power of two; 1 to 128 points a tile): ignored"
        );
    }
    o
}

/// `POINTSxUNITS,GRAD_UxGRAD_K,CUBE[,TILE]` (e.g. `8x4,8x4,128`).
pub(super) fn parse(text: &str) -> Option<Override> {
    let mut parts = text.split(',').map(str::trim);
    let pair = |p: Option<&str>, first: fn(usize) -> bool, second: fn(usize) -> bool| {
        let (a, b) = p?.split_once('x')?;
        let a = a.parse().ok().filter(|&n| first(n))?;
        let b = b.parse().ok().filter(|&n| second(n))?;
        Some((a, b))
    };
    let units = |n: usize| matches!(n, 1 | 2 | 4 | 8);
    let grad = |n: usize| matches!(n, 1 | 2 | 4 | 8 | 16);
    let (points, units) = pair(parts.next(), |n| (1..=8).contains(&n), units)?;
    let (grad_u, grad_k) = pair(parts.next(), grad, grad)?;
    let cube = parts
        .next()?
        .parse()
        .ok()
        .filter(|c: &usize| c.is_power_of_two() && (32..=1024).contains(c))?;
    let tile = match parts.next() {
        Some(t) => Some(t.parse().ok().filter(|t| (1..=MAX_TILE).contains(t))?),
        None => None,
    };
    parts.next().is_none().then_some(Override {
        blocks: Blocks {
            points,
            units,
            grad_u,
            grad_k,
            cube,
            ..Blocks::default()
        },
        tile,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_choice_parses_and_a_bad_one_does_not() {
        let o = parse("8x4, 4x8, 128").unwrap();
        let b = o.blocks;
        assert_eq!(
            (b.points, b.units, b.grad_u, b.grad_k, b.cube, o.tile),
            (8, 4, 4, 8, 128, None)
        );
        let o = parse("7x4,4x16,512,107").unwrap();
        assert_eq!(
            (o.blocks.points, o.blocks.grad_k, o.blocks.cube, o.tile),
            (7, 16, 512, Some(107))
        );
        for bad in [
            "8x4,4x8",
            "8x3,4x4,128",
            "9x4,4x4,128",
            "8x4,4x4,96",
            "8x4,4x4,2048",
            "4x4,4x4,256,0",
            "4x4,4x4,256,129",
            "4x4,4x4,256,64,1",
        ] {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }
}
