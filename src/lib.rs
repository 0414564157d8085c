//! ferrofit: train small MLPs on any GPU (Vulkan/DX12/Metal through wgpu, CUDA)
//! or the CPU, with a general engine on Burn and a fused engine, and measure it.
//!
//! Layout: `config` (every knob), `task` (built-in data), `model` (parameters,
//! float64 reference), `engine` (general and fused engines, the shared loop),
//! `backend` (devices, selection, dispatch), `record`/`save`/`io` (outputs),
//! `bench`/`doctor`/`tune` (measuring, checking and searching), `fit` (the
//! front door for programs: arrays in, a model out). The command line lives
//! in the binary (`src/main.rs`, `src/cli/`).

#![warn(missing_docs)]

pub mod backend;
pub mod batches;
pub mod bench;
pub mod chart;
pub mod doctor;
pub mod engine;
pub mod fit;
pub mod interrupt;
pub mod io;
pub mod model;
pub mod record;
pub mod report;
pub mod rundir;
pub mod save;
pub mod schedule;
pub mod trainer;
pub mod tune;

pub use ferrofit_spec::{args, columns, config, csv, error, rng, task, userdata};
pub use ferrofit_spec::{FerroError, Result};
