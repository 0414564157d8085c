//! The `#[cube]` kernels of the fused GPU engine.
//!
//! - `fused`: the two-launch step — `fused_grad` over a micro-batch, then
//!   `reduce_update` (sum the cubes' partial rows, step the optimizer);
//! - `persistent`: many full-batch steps in one launch, cubes exchanging
//!   gradient rows through global memory;
//! - `split`: wide layers, a point's hidden units split over a plane's lanes;
//! - `tiled` + `layers`: several hidden layers, a tile of points at a time
//!   with activations in shared memory;
//! - `ops` (per-point pass, cube reductions) and `math` (activations, losses,
//!   optimizer rules): device functions shared by all of them.

pub mod fused;
pub mod layers;
pub mod math;
pub mod ops;
pub mod persistent;
pub mod split;
pub mod tiled;
