//! The environment switches for measuring the fused GPU kernels another
//! way: `FERROFIT_LOAD_AHEAD` (points a unit loads at once),
//! `FERROFIT_BOUNDS_CHECKS` (CubeCL's bounds checks on the gradient
//! kernels), `FERROFIT_VULKAN_TENSOR_CORES=0` (no tensor-core pass through
//! SPIR-V's cooperative matrices) and `FERROFIT_ROWS_AHEAD=1` (the tiled
//! kernel's partial rows read before the sums that add into them). Read
//! when an engine is built.

use crate::engine::fused::gpu::kernels::point::LOAD_AHEAD;

/// Points a unit of the one-layer kernels loads at once: [`LOAD_AHEAD`], or
/// `FERROFIT_LOAD_AHEAD` (1–8) for measuring another (registers against
/// loads in flight).
pub(super) fn load_ahead() -> usize {
    std::env::var("FERROFIT_LOAD_AHEAD")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|a| (1..=8).contains(a))
        .unwrap_or(LOAD_AHEAD)
}

/// Whether `FERROFIT_BOUNDS_CHECKS=on` asks for the gradient kernels
/// (per-point, tiled, persistent) with CubeCL's bounds checks. They run
/// without by default: every index they use is in range by construction
/// (clamped, or guarded by the point count), and the checks cost a compare
/// and a select on every load and store (and, on Vulkan, a counter on every
/// loop). The switch is for telling a kernel bug from a device one: with it,
/// an index past the end reads zero instead of whatever lies there.
pub(super) fn bounds_checks() -> bool {
    std::env::var("FERROFIT_BOUNDS_CHECKS").is_ok_and(|v| matches!(v.as_str(), "on" | "1"))
}

/// Whether the tensor-core pass may run on a wgpu device whose kernels
/// CubeCL compiles to SPIR-V with cooperative matrices: yes unless
/// `FERROFIT_VULKAN_TENSOR_CORES=0` (or `off`), which runs f16/bf16 emulated
/// on the f32 tiled kernel there instead — for comparing the two, or as a
/// way round a driver that builds the pass wrongly (docs/PERFORMANCE.md,
/// "Tensor cores on Vulkan").
pub(super) fn vulkan_tensor_cores() -> bool {
    std::env::var("FERROFIT_VULKAN_TENSOR_CORES")
        .map_or(true, |v| !matches!(v.as_str(), "0" | "off"))
}

/// Whether `FERROFIT_ROWS_AHEAD=1` (or `on`) asks the tiled kernel's
/// one-value weight-gradient blocks to read their entries of the cube's
/// partial row before their Σ over the tile, so that the loads' latency
/// hides behind the sums (at the cost of a register a value held through
/// them): the same gradients bit for bit, off until measured faster
/// (`Blocks::rows_ahead`).
pub(super) fn rows_ahead() -> bool {
    std::env::var("FERROFIT_ROWS_AHEAD").is_ok_and(|v| matches!(v.as_str(), "on" | "1"))
}
