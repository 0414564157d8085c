//! `FERROFIT_TENSOR_PLAN`: a tensor-core layout named in the environment
//! (`TILE[,streamed][,UNITS][,cmma][,strips][,held=N][,tile-sums]`, e.g.
//! `64,256,held=2`; `tile-sums`: the bias and first-layer sums read back
//! from the δ rows, not made in the down products)
//! instead of the one [`super::plan`] chooses, where it fits the model and
//! the device — for A/B runs on a device (`benches/device/run.sh plans`).

use super::{resident_cubes, strips_of, Plan, Shape, TILES};
use crate::engine::fused::gpu::kernels::held;
use crate::engine::fused::gpu::kernels::mma::PLANE_UNITS;
use crate::engine::fused::gpu::kernels::ops::CUBE_UNITS;

/// The layout `FERROFIT_TENSOR_PLAN` names, where it fits (on registers
/// only where `manual` allows).
pub(super) fn overridden(s: &Shape, max_shared: usize, manual: bool) -> Option<Plan> {
    let text = std::env::var("FERROFIT_TENSOR_PLAN").ok()?;
    let mut p = parse(&text)?;
    p.regs &= manual && !p.streamed;
    if p.strips && p.regs {
        p = strips_of(p.tile);
    }
    p.strips &= p.regs;
    let planes = p.units / PLANE_UNITS as usize;
    if p.strips || !p.regs || held::blocks_a_plane(s.hidden, planes).is_none() {
        p.held = 0;
    }
    p.held = p.held.min(s.layers - 1);
    let fits = resident_cubes(s, &p, max_shared) >= 1;
    if !fits {
        log::warn!("FERROFIT_TENSOR_PLAN={text} does not fit this model and device: ignored");
    }
    fits.then_some(p)
}

/// `TILE[,streamed][,UNITS][,cmma][,strips][,held=N][,tile-sums]` as a plan.
pub(super) fn parse(text: &str) -> Option<Plan> {
    let mut parts = text.split(',').map(str::trim);
    let tile = parts.next()?.parse().ok().filter(|t| TILES.contains(t))?;
    let mut p = Plan {
        tile,
        streamed: false,
        units: CUBE_UNITS as usize,
        regs: true,
        strips: false,
        held: 0,
        down_sums: true,
    };
    for word in parts {
        match word {
            "streamed" => p.streamed = true,
            "cmma" => p.regs = false,
            "strips" => p.strips = true,
            "tile-sums" => p.down_sums = false,
            "256" | "512" => p.units = word.parse().ok()?,
            _ if word.starts_with("held=") => p.held = word["held=".len()..].parse().ok()?,
            _ => return None,
        }
    }
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_override_names_a_tile_and_its_options() {
        let p = parse("64, streamed,512").unwrap();
        assert_eq!((p.tile, p.streamed, p.units, p.regs), (64, true, 512, true));
        assert!(!parse("64,cmma").unwrap().regs);
        assert_eq!(parse("128").unwrap().units, 256);
        assert_eq!(
            parse("64,256,held=2").map(|p| (p.units, p.held)),
            Some((256, 2))
        );
        assert!(!parse("64,tile-sums").unwrap().down_sums);
        assert!(parse("64").unwrap().down_sums);
        assert_eq!(parse("64,held=x"), None);
        assert_eq!(parse("64,fast"), None);
        assert_eq!(parse("48"), None);
        assert_eq!(parse("x"), None);
    }
}
