//! The fused engine: a whole MLP training step without whole-batch intermediates.
//!
//! `cpu` runs it on all cores in Rust. It checks [`envelope::check`] first.

pub mod cpu;
pub mod cpu_kernel;
pub mod envelope;
pub mod optim;
