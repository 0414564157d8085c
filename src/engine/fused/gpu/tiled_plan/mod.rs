//! How the tiled kernel ([`crate::engine::fused::gpu::kernels::tiled`])
//! shares out its layer products: the register [`Blocks`] of its units and
//! the units a cube, for a model, a tile of points and the compiler, and
//! whether its hidden layers load 16-byte lines. A run's `--tiled-threads`
//! sets its units a cube (`ferrofit tune` tries them);
//! `FERROFIT_TILED_BLOCKS` (`env.rs`) names other blocks (and tile), for
//! measuring them.

mod env;

use crate::engine::fused::gpu::kernels::lined;
use crate::engine::fused::gpu::kernels::tile::{
    tile_bytes, tile_points, FULL_BLOCKS, LOSS_SCRATCH,
};
use crate::engine::fused::gpu::knobs::rows_ahead;
use crate::engine::fused::gpu::shape::{Blocks, Shape};
use env::{overridden, Override};

/// What the tiled kernel's plan needs to know of its device: shared memory
/// a cube may take (bytes), units a cube may have, whether it compiles
/// through CUDA, whether its launches are bounds-checked.
#[derive(Clone, Copy, Debug)]
pub struct TiledDevice {
    /// Bytes of shared memory a cube may take.
    pub max_shared: usize,
    /// Units a cube may have.
    pub max_units: usize,
    /// Plane operations (without them the loss's sum takes a value of
    /// shared memory a unit: [`LOSS_SCRATCH`] units at most).
    pub plane: bool,
    /// CUDA C++ through NVRTC (with f32 operands).
    pub cuda: bool,
    /// Launches with CubeCL's bounds checks.
    pub checked: bool,
}

impl TiledDevice {
    /// The most units a tiled cube takes here: a power of two, at least 32.
    fn max_cube(&self) -> usize {
        let units = if self.plane {
            self.max_units
        } else {
            self.max_units.min(LOSS_SCRATCH)
        };
        1 << units.max(32).ilog2()
    }
}

/// The tiled kernel's tile and blocks for `s`'s model on `dev`: those
/// `FERROFIT_TILED_BLOCKS` names (the tile where it fits), else
/// [`tile_points`] and [`tiled_blocks`]; in cubes of `threads` units where
/// the run names them (`--tiled-threads`), at most as many as `dev` allows;
/// the one-value passes' partial rows read ahead where `FERROFIT_ROWS_AHEAD`
/// asks (`Blocks::rows_ahead`).
pub fn tiled_layout(s: &Shape, dev: TiledDevice, threads: Option<usize>) -> (usize, Blocks) {
    // FERROFIT_TILED_BLOCKS, read (and warned about) once.
    let (tile, b) = layout(s, dev, overridden(), threads);
    let rows_ahead = rows_ahead() && !b.lined;
    (tile, Blocks { rows_ahead, ..b })
}

/// [`tiled_layout`] with the choice `named` (what `FERROFIT_TILED_BLOCKS`
/// says, or None). The lined passes take one line of 4 units a lane, so
/// there a named `UNITS` or `GRAD_U` other than 4 is set to 4, with a warning.
fn layout(
    s: &Shape,
    dev: TiledDevice,
    named: Option<Override>,
    threads: Option<usize>,
) -> (usize, Blocks) {
    let TiledDevice {
        max_shared, cuda, ..
    } = dev;
    let lined = tiled_lines(s, cuda, dev.checked);
    let tile = match named.as_ref().and_then(|o| o.tile) {
        Some(t) if tile_bytes(s, t, lined) <= max_shared => t,
        Some(t) => {
            log::warn!(
                "FERROFIT_TILED_BLOCKS: a tile of {t} points does not fit this device: ignored"
            );
            tile_points(s, max_shared, lined)
        }
        None => tile_points(s, max_shared, lined),
    };
    let mut b = named.map_or_else(|| tiled_blocks(s, tile, cuda, lined), |o| o.blocks);
    let cube = threads.unwrap_or(b.cube);
    if cube > dev.max_cube() && threads.is_some() {
        log::warn!(
            "--tiled-threads {cube}: this device runs at most {} threads a workgroup here: {0} instead",
            dev.max_cube()
        );
    }
    b.cube = cube.min(dev.max_cube());
    if lined && (b.units, b.grad_u) != (lined::LINE, lined::LINE) {
        log::warn!(
            "FERROFIT_TILED_BLOCKS: the 16-byte passes take {0} units a lane: \
             units {1} and weight-gradient units {2} run as {0}",
            lined::LINE,
            b.units,
            b.grad_u
        );
        b.units = lined::LINE;
        b.grad_u = lined::LINE;
    }
    (tile, Blocks { lined, ..b })
}

/// Whether the tiled kernel's hidden layers take the lined passes
/// (`kernels::lined`, 16-byte loads): on CUDA, without bounds checks (CubeCL
/// compiles vector views only in unchecked launches; to WGSL not at all, and
/// its SPIR-V stores a line into a float, which lavapipe refuses), for
/// hidden layers of a multiple of 4 units.
pub fn tiled_lines(s: &Shape, cuda: bool, checked: bool) -> bool {
    cuda && !checked && lined::fits(s.hidden)
}

/// The blocks for `s`'s model with tiles of `tile` points, on CUDA or not,
/// as measured on the H200 (docs/PERFORMANCE.md, "The tiled kernel's register blocks" and
/// "Lined passes"):
/// - lined (CUDA): a lane takes up to 8 points — as few as leave little
///   padding (7 for a 108-point tile) — × a line of 4 units, about one
///   forward item a unit (128 to 512 units a cube), and weight-gradient
///   blocks of 4 units × 4 to 16 inputs, the widest that keep every unit busy;
/// - tiles of [`FULL_BLOCKS`] points or more on CUDA, one value a load:
///   8 points × 4 units, 8 × 4 weight-gradient entries, about one forward
///   block a unit — 3 × 64 345 → 325 ms, 4 × 128 2.54 → 2.44 s;
/// - elsewhere, 4 × 4 blocks and 256 units a cube (on Vulkan 8 × 4 blocks
///   ran 3 × 64 1.4× slower); tiles of fewer points take blocks of 2 points,
///   off CUDA in cubes of about a unit for each 4 × 4 weight-gradient
///   block of a hidden layer, 256 to [`SMALL_TILE_MAX_UNITS`] (or as many as
///   the device allows).
pub fn tiled_blocks(s: &Shape, tile: usize, cuda: bool, lined: bool) -> Blocks {
    if lined {
        let points = lined::lane_points(tile);
        let forward = lined::block_items(tile, points, s.hidden);
        let cube = forward.next_power_of_two().clamp(128, 512);
        // The widest weight-gradient blocks (4 units × 4, 8 or 16 inputs)
        // whose plane of 8 lanes fits in the layer's inputs and that still
        // leave no unit of the cube without one: 4 × 128 in two
        // cubes of 256 ran 1.81 → 1.29 s with 16 inputs instead of 8, in one
        // of 512 8 inputs took 1.19 s and 16 (half the units idle) 1.28 s.
        let items = |k: usize| lined::grad_items(s.hidden, s.hidden, lined::LINE, k / lined::LINE);
        let grad_k = [16, 8, 4]
            .into_iter()
            .find(|&k| k * 8 <= s.hidden && items(k) >= cube)
            .unwrap_or(4);
        return Blocks {
            points,
            units: 4,
            grad_u: 4,
            grad_k,
            cube,
            lined,
            ..Blocks::default()
        };
    }
    if tile < FULL_BLOCKS {
        return Blocks {
            points: 2,
            cube: if cuda {
                256
            } else {
                small_tile_units(s.hidden)
            },
            ..Blocks::default()
        };
    }
    if !cuda {
        return Blocks::default();
    }
    let (points, units) = (8, 4);
    let forward = tile.div_ceil(points) * s.hidden.div_ceil(units);
    Blocks {
        points,
        units,
        grad_u: 8,
        grad_k: 4,
        cube: forward.next_power_of_two().clamp(128, 256),
        lined,
        ..Blocks::default()
    }
}

/// Most units a cube of a small tile (fewer than [`FULL_BLOCKS`] points)
/// takes off CUDA.
const SMALL_TILE_MAX_UNITS: usize = 1024;

/// Units a cube of a small tile off CUDA for hidden layers `hidden` wide:
/// about one a weight-gradient block of a hidden layer (the default
/// blocks' 4 × 4; a power of two, from the default cube's 256 to
/// [`SMALL_TILE_MAX_UNITS`]). Vulkan's 48 KiB hold 23 points at
/// 4 × 128, where the weight gradients' 1,024 blocks are most of the work:
/// cubes of 1,024 units took 3.445 s for 100 steps against 4.949 s in cubes
/// of 256; at 6 × 64 (30 points, 256 blocks) 1,024 units were slower, 1.485
/// against 1.415 s; same losses (H100, docs/PERFORMANCE.md, "Vulkan's
/// small tiles").
fn small_tile_units(hidden: usize) -> usize {
    let b = Blocks::default();
    let blocks = hidden.div_ceil(b.grad_u) * hidden.div_ceil(b.grad_k);
    1 << blocks.clamp(b.cube, SMALL_TILE_MAX_UNITS).ilog2()
}

#[cfg(test)]
mod tests {
    use super::env::parse;
    use super::*;
    use crate::config::Activation;

    use crate::engine::fused::gpu::limits::{SM90_SHARED as H200, VULKAN_NVIDIA_SHARED};

    fn relu(hidden: usize, layers: usize) -> Shape {
        Shape::mse_sgd((1, 1), hidden, layers, Activation::Relu)
    }

    /// A CUDA device of `max_shared` bytes a cube, launches `checked` or not.
    fn cuda(max_shared: usize, checked: bool) -> TiledDevice {
        TiledDevice {
            max_shared,
            max_units: 1024,
            plane: true,
            cuda: true,
            checked,
        }
    }

    /// NVIDIA's Vulkan driver (48 KiB, 1,024 units) or another of `max_units`.
    fn vulkan(max_units: usize) -> TiledDevice {
        TiledDevice {
            max_shared: VULKAN_NVIDIA_SHARED,
            max_units,
            plane: true,
            cuda: false,
            checked: false,
        }
    }

    #[test]
    fn small_tiles_off_cuda_take_a_unit_a_gradient_block_within_the_device_limit() {
        let (wide, deep) = (relu(128, 4), relu(64, 3));
        let (tile, b) = layout(&wide, vulkan(1024), None, None);
        assert_eq!(tile, 23);
        assert_eq!((b.points, b.units, b.cube, b.lined), (2, 4, 1024, false));
        // WebGPU's default limit (256), and a device of an odd limit.
        assert_eq!(layout(&wide, vulkan(256), None, None).1.cube, 256);
        assert_eq!(layout(&wide, vulkan(768), None, None).1.cube, 512);
        // A named cube is held to the device's limit too.
        let named = layout(&wide, vulkan(256), parse("2x4,4x4,1024"), None);
        assert_eq!(named.1.cube, 256);
        // Without plane operations, as many as the loss's scratch has values.
        let plane_less = TiledDevice {
            plane: false,
            ..vulkan(1024)
        };
        assert_eq!(layout(&wide, plane_less, None, None).1.cube, LOSS_SCRATCH);
        // Layers of 64 (a gradient of 256 blocks) keep 256 units, 96 take 512.
        assert_eq!(layout(&relu(64, 6), vulkan(1024), None, None).1.cube, 256);
        assert_eq!(layout(&relu(96, 4), vulkan(1024), None, None).1.cube, 512);
        // A run's --tiled-threads sets the cube (held to the device's limit),
        // over the engine's choice and a named one alike.
        assert_eq!(layout(&deep, vulkan(1024), None, Some(512)).1.cube, 512);
        assert_eq!(layout(&wide, vulkan(256), None, Some(1024)).1.cube, 256);
        let named = layout(&wide, vulkan(1024), parse("4x4,4x4,128"), Some(64));
        assert_eq!((named.1.points, named.1.cube), (4, 64));
        // Full tiles keep 256 units; CUDA's small tiles too.
        assert_eq!(layout(&deep, vulkan(1024), None, None).1, Blocks::default());
        assert_eq!(tiled_blocks(&wide, 23, true, false).cube, 256);
    }

    #[test]
    fn a_named_choice_is_taken_where_it_fits() {
        let wide = relu(128, 4);
        // One-value passes (bounds-checked): the blocks and tile as named.
        let (tile, b) = layout(&wide, cuda(H200, true), parse("8x4,8x4,256,40"), None);
        assert_eq!(
            (tile, b.points, b.grad_u, b.cube, b.lined),
            (40, 8, 8, 256, false)
        );
        // A tile that does not fit the device: the engine's own instead.
        let (tile, _) = layout(&wide, cuda(48 * 1024, true), parse("8x4,8x4,256,128"), None);
        assert_eq!(tile, tile_points(&wide, 48 * 1024, false));
        // Lined passes: 4 units a lane whatever was named.
        let (tile, b) = layout(&wide, cuda(H200, false), parse("7x8,8x8,512,107"), None);
        assert_eq!(
            (tile, b.points, b.units, b.grad_u, b.grad_k),
            (107, 7, 4, 4, 8)
        );
        assert!(b.lined);
        // Nothing named: the engine's choice.
        let (tile, b) = layout(&wide, cuda(H200, false), None, None);
        assert_eq!(
            (tile, b),
            (
                tile_points(&wide, H200, true),
                tiled_blocks(&wide, tile, true, true)
            )
        );
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
        // 4 × 128's 108 points: two chunks of 8 lanes × 7 points (112, not 128),
        // a plane for each 16 units of each; gradient blocks of 4 × 8 give
        // 512 units 512 blocks (4 × 16 would leave half of them idle).
        let b = tiled_blocks(&wide, tile_points(&wide, H200, true), true, true);
        assert_eq!((b.points, b.grad_k, b.cube), (7, 8, 512));
        // In cubes of 256 (a 53-point tile), 4 × 16.
        assert_eq!(tiled_blocks(&wide, 53, true, true).grad_k, 16);
    }
}
