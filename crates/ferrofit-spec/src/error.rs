//! Typed errors of the library. Every message names what to change.

use thiserror::Error;

/// Everything that can go wrong in ferrofit, each with the fix in its message.
#[derive(Debug, Error)]
pub enum FerroError {
    /// A configuration value is out of range.
    #[error("invalid --{flag} {value}: {fix}")]
    InvalidArg {
        flag: &'static str,
        value: String,
        fix: String,
    },
    /// The backend was left out of this build.
    #[error("backend `{backend}` is not compiled into this binary: rebuild with `cargo build --release --features {feature}`")]
    BackendNotCompiled {
        backend: &'static str,
        feature: &'static str,
    },
    /// The backend is compiled in but no usable device was found.
    #[error("no {backend} device available: {detail}. Run `ferrofit devices` to list what this machine has, or pick another --backend")]
    NoDevice { backend: String, detail: String },
    /// A device index beyond what was found.
    #[error("--device {index} is out of range: {backend} has {count} device(s) (0..{count}); run `ferrofit devices`")]
    DeviceOutOfRange {
        backend: String,
        index: usize,
        count: usize,
    },
    /// The backend started but crashed while running.
    #[error("the {backend} backend failed: {detail}. Try another --backend, or run `ferrofit devices` to check the driver")]
    BackendFailed { backend: String, detail: String },
    /// A panic in ferrofit's own code: a bug, reported as one.
    #[error("ferrofit hit a bug: {detail} (at {location}). Nothing is wrong with your setup; please report it with the command line, the output of `ferrofit devices`, and this message")]
    Bug { detail: String, location: String },
    /// The model is outside what the fused engine supports.
    #[error("the fused engine does not support this model: {reason}. Use --engine general (or --engine auto to fall back automatically)")]
    OutsideEnvelope { reason: String },
    /// Training produced a non-finite loss.
    #[error("the loss became {value} at step {step}: lower --lr, use --precision bf16, --optimizer adam, or --clip-grad 1.0")]
    Diverged { step: usize, value: f32 },
    /// The user pressed Ctrl-C; a checkpoint was written first.
    #[error("stopped at step {step} (Ctrl-C); checkpoint written to {saved}: continue with `ferrofit train --resume DIR`")]
    Interrupted { step: usize, saved: String },
    /// Reading or writing a file failed.
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A file ferrofit keeps (a cache, a checkpoint) is missing an entry or damaged.
    #[error("{path}: {detail}")]
    File { path: String, detail: String },
    /// A user data file is malformed; `line` is 1-based (0: the whole file).
    #[error("{path}{}: {detail}", at_line(*.line))]
    Data {
        path: String,
        line: usize,
        detail: String,
    },
    /// Rasterising a plot failed.
    #[error("drawing the plot: {0}. Ask for an .svg file instead")]
    Plot(String),
    /// Anything a model file can get wrong.
    #[error("model file {path}: {detail}")]
    ModelFile { path: String, detail: String },
}

fn at_line(line: usize) -> String {
    if line > 0 {
        format!(" line {line}")
    } else {
        String::new()
    }
}

/// Shorthand for results in ferrofit.
pub type Result<T> = std::result::Result<T, FerroError>;

/// Exit statuses, as the tools people know use them (hyperfine, cargo, ripgrep).
pub mod exit {
    /// The run or check failed (divergence, a backend failure, a failed doctor check).
    pub const FAILED: i32 = 1;
    /// The command line or its inputs are wrong (a flag; a data, model or
    /// record file that is missing or does not fit).
    pub const USAGE: i32 = 2;
    /// Stopped by Ctrl-C (128 + SIGINT).
    pub const INTERRUPTED: i32 = 130;
}

impl FerroError {
    /// The process exit status this error ends `ferrofit` with.
    pub fn exit_code(&self) -> i32 {
        match self {
            FerroError::InvalidArg { .. }
            | FerroError::BackendNotCompiled { .. }
            | FerroError::NoDevice { .. }
            | FerroError::DeviceOutOfRange { .. }
            | FerroError::OutsideEnvelope { .. }
            | FerroError::File { .. }
            | FerroError::Data { .. }
            | FerroError::ModelFile { .. } => exit::USAGE,
            // An input that cannot be read is the command line's to fix.
            FerroError::Io { action, .. } if action.starts_with("reading") => exit::USAGE,
            FerroError::Interrupted { .. } => exit::INTERRUPTED,
            FerroError::BackendFailed { .. }
            | FerroError::Bug { .. }
            | FerroError::Diverged { .. }
            | FerroError::Io { .. }
            | FerroError::Plot(_) => exit::FAILED,
        }
    }

    /// An argument error with the flag, its value and the fix.
    pub fn arg(flag: &'static str, value: impl ToString, fix: impl Into<String>) -> Self {
        FerroError::InvalidArg {
            flag,
            value: value.to_string(),
            fix: fix.into(),
        }
    }
}
