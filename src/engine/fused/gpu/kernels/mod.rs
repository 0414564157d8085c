//! The `#[cube]` kernels of the fused GPU engine.
//!
//! - `args`: the argument groups they share (data, batch, optimizer state and rule);
//! - `fused`: the two-launch step — `fused_grad` over a micro-batch, then
//!   `reduce_update` (sum the cubes' partial rows, step the optimizer);
//! - `persistent`: many full-batch steps in one launch, cubes exchanging
//!   gradient rows through global memory;
//! - `split`: wide layers, a point's hidden units split over a plane's lanes;
//! - `tensor` + `mma` (cmma fragments) or `mma_regs` (manual MMA on
//!   registers) + `head` (the output layer) + `down` (a layer going down) +
//!   `sums` + `first` (the first hidden layer): several hidden layers on
//!   tensor cores, half-precision operands;
//!   `held`: their top layers' weight gradients kept in registers over a launch;
//!   `colsums`: their bias and first-layer sums made by the products going down;
//! - `strips` + `strip`: the same on registers, each plane taking its own
//!   16 points through every layer (barriers only for the weight gradients);
//!   `rows`: what the two tensor-core passes do alike around their tiles;
//! - `tiled` + `tile` + `layers` (one value a load) or `lined` (16-byte
//!   loads, CUDA): several hidden layers, a tile of points at a time with
//!   activations in shared memory; `round`: half-precision operands
//!   emulated on them where no tensor core takes the model;
//! - `point` (one unit a point, one hidden layer), `ops` (a cube's gradient
//!   row, cube reductions) and `math` (activations, losses, optimizer rules):
//!   device functions shared by all of them.

pub mod args;
pub mod colsums;
pub mod down;
pub mod first;
pub mod fused;
pub mod head;
pub mod held;
pub mod layers;
pub mod lined;
pub mod math;
pub mod mma;
pub mod mma_regs;
pub mod ops;
pub mod persistent;
pub mod point;
pub mod round;
pub mod rows;
pub mod split;
pub mod strip;
pub mod strips;
pub mod sums;
pub mod tensor;
pub mod tile;
pub mod tiled;
