//! The MLP itself, independent of any engine: activations, losses and a
//! float64 reference forward/backward that every engine is checked against.
//! The parameters (`Params`, PyTorch's layout, seeded init) live in the spec
//! crate beside the file formats that hold them, and are re-exported here.

pub mod activation;
pub mod loss;
pub mod reference;

pub use ferrofit_spec::params::{LayerParams, Params};
