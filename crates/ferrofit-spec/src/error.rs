//! Typed errors of the library. Every message names what to change.

use thiserror::Error;

/// Everything that can go wrong in ferrofit, each with the fix in its message.
#[derive(Debug, Error)]
pub enum FerroError {
    /// A configuration value is out of range.
    #[error("invalid --{flag} {value}: {fix}")]
    InvalidArg {
        /// The setting, as its flag names it (without `--`).
        flag: &'static str,
        /// The value given.
        value: String,
        /// What to give instead.
        fix: String,
    },
    /// The backend was left out of this build.
    #[error("backend `{backend}` is not compiled into this binary: rebuild with `cargo build --release --features {feature}`")]
    BackendNotCompiled {
        /// The backend asked for.
        backend: &'static str,
        /// The cargo feature that builds it in.
        feature: &'static str,
    },
    /// The backend is compiled in but no usable device was found.
    #[error("no {backend} device available: {detail}. Run `ferrofit devices` to list what this machine has, or pick another --backend")]
    NoDevice {
        /// The backend asked for.
        backend: String,
        /// What its probe said.
        detail: String,
    },
    /// A device index beyond what was found.
    #[error("--device {index} is out of range: {backend} has {count} device(s) (0..{count}); run `ferrofit devices`")]
    DeviceOutOfRange {
        /// The backend asked for.
        backend: String,
        /// The index given.
        index: usize,
        /// Devices it has.
        count: usize,
    },
    /// The backend started but crashed while running.
    #[error("the {backend} backend failed: {detail}. Try another --backend, or run `ferrofit devices` to check the driver")]
    BackendFailed {
        /// The backend that failed.
        backend: String,
        /// What it said.
        detail: String,
    },
    /// A panic in ferrofit's own code: a bug, reported as one.
    #[error("ferrofit hit a bug: {detail} (at {location}). Nothing is wrong with your setup; please report it with the command line, the output of `ferrofit devices`, and this message")]
    Bug {
        /// The panic's message.
        detail: String,
        /// Where in ferrofit's source it happened.
        location: String,
    },
    /// The model is outside what the fused engine supports.
    #[error("the fused engine does not support this model: {reason}. Use --engine general (or --engine auto to fall back automatically)")]
    OutsideEnvelope {
        /// Which limit the model passes.
        reason: String,
    },
    /// Training produced a non-finite loss.
    #[error("the loss became {value} at step {step}: lower --lr, use --precision bf16, --optimizer adam, or --clip-grad 1.0")]
    Diverged {
        /// The step (0-based).
        step: usize,
        /// The loss there (NaN or infinite).
        value: f32,
    },
    /// The user pressed Ctrl-C; a checkpoint was written first.
    #[error("stopped at step {step} (Ctrl-C); checkpoint written to {saved}: continue with `ferrofit train --resume DIR`")]
    Interrupted {
        /// Steps done.
        step: usize,
        /// The checkpoint's folder.
        saved: String,
    },
    /// Reading or writing a file failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done (`reading`, `writing`, …).
        action: &'static str,
        /// The file or folder.
        path: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A file ferrofit keeps (a cache, a checkpoint) is missing an entry or damaged.
    #[error("{path}: {detail}")]
    File {
        /// The file.
        path: String,
        /// What is wrong with it.
        detail: String,
    },
    /// A user data file is malformed; `line` is 1-based (0: the whole file).
    #[error("{path}{}: {detail}", at_line(*.line))]
    Data {
        /// The file.
        path: String,
        /// The line, 1-based (0: the whole file).
        line: usize,
        /// What is wrong there, and the fix.
        detail: String,
    },
    /// Rasterising a plot failed.
    #[error("drawing the plot: {0}. Ask for an .svg file instead")]
    Plot(String),
    /// Anything a model file can get wrong.
    #[error("model file {path}: {detail}")]
    ModelFile {
        /// The model file.
        path: String,
        /// What is wrong with it.
        detail: String,
    },
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
