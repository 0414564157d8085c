//! The MLP itself, independent of any engine: parameters, activations, losses
//! and a float64 reference forward/backward that every engine is checked against.

pub mod activation;
pub mod loss;
pub mod reference;

pub use ferrofit_spec::params::{LayerParams, Params};
