//! ferrofit-spec: what a training job *is*, with no engine attached — the
//! configuration and its validation, the command-line knobs, the built-in
//! tasks and their counter-based RNG, the CSV reader for user data, the
//! model's parameters and the byte formats of the files that hold them (model,
//! checkpoint), and the error type. Small and dependency-light so fuzz targets build in seconds.

#![warn(missing_docs)]

pub mod args;
pub mod choices;
pub mod columns;
pub mod config;
pub mod csv;
pub mod data;
pub mod error;
pub mod files;
pub mod knobs;
pub mod normalization;
pub mod params;
pub mod predict_inputs;
pub mod rng;
pub mod task;
pub mod userdata;

pub use error::{FerroError, Result};
