//! The general engine: the MLP as a Burn module, trained with Burn's autodiff
//! and optimizers on any Burn backend. It is the reference the fused engine is
//! measured and checked against.

pub mod data;
pub mod engine;
pub mod model;
pub mod scaler;

pub use engine::GeneralEngine;
