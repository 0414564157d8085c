//! Built-in target functions and the data they generate.
//!
//! Each task is 1-D: `x` is `linspace(-1, 1, n)` and `y = f(x) + noise·U(0,1)`,
//! exactly the seed job's recipe for `x2-noise`. The same definition is used
//! on the host (here) and on devices (the engines), so every engine sees the
//! same function.

use crate::error::{FerroError, Result};
use crate::rng::{stream, uniform};
use serde::{Deserialize, Serialize};

/// A built-in regression target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Task {
    /// y = x² + 0.3·U(0,1): the seed job's.
    #[serde(rename = "x2-noise")]
    #[value(name = "x2-noise")]
    X2Noise,
    /// y = sin(πx) + 0.1·U(0,1).
    Sin,
    /// y = 1 if x > 0 else 0.
    Step,
    /// y = exp(-((x-0.4)/0.15)²) + 0.6·exp(-((x+0.5)/0.25)²).
    GaussBumps,
}

impl std::fmt::Display for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.name())
    }
}

impl Task {
    /// Every task name `--task` accepts.
    pub const NAMES: [&'static str; 4] = ["x2-noise", "sin", "step", "gauss-bumps"];

    /// The name `--task` takes and records hold.
    pub fn name(self) -> &'static str {
        match self {
            Task::X2Noise => "x2-noise",
            Task::Sin => "sin",
            Task::Step => "step",
            Task::GaussBumps => "gauss-bumps",
        }
    }

    /// Parses a `--task` value.
    pub fn parse(name: &str) -> Result<Task> {
        match name {
            "x2-noise" => Ok(Task::X2Noise),
            "sin" => Ok(Task::Sin),
            "step" => Ok(Task::Step),
            "gauss-bumps" => Ok(Task::GaussBumps),
            other => Err(FerroError::arg(
                "task",
                other,
                format!("choose one of: {}", Task::NAMES.join(", ")),
            )),
        }
    }

    /// Amplitude of the U(0,1) noise added to the target.
    pub fn noise(self) -> f64 {
        match self {
            Task::X2Noise => 0.3,
            Task::Sin => 0.1,
            Task::Step | Task::GaussBumps => 0.0,
        }
    }

    /// The noiseless function.
    pub fn f(self, x: f64) -> f64 {
        match self {
            Task::X2Noise => x * x,
            Task::Sin => (std::f64::consts::PI * x).sin(),
            Task::Step => {
                if x > 0.0 {
                    1.0
                } else {
                    0.0
                }
            }
            Task::GaussBumps => {
                let a = (x - 0.4) / 0.15;
                let b = (x + 0.5) / 0.25;
                (-a * a).exp() + 0.6 * (-b * b).exp()
            }
        }
    }

    /// The i-th of n evenly spaced points in [-1, 1] (`torch.linspace`).
    pub fn x_at(i: usize, n: usize) -> f64 {
        if n == 1 {
            -1.0
        } else {
            -1.0 + 2.0 * i as f64 / (n - 1) as f64
        }
    }

    /// Generates the task's data on the host. Every point depends on its
    /// index alone (counter-based noise), so large sets are made in chunks on
    /// every core with the same result as one thread (1e8 points took seconds
    /// on one).
    pub fn generate(self, n: usize, seed: u64) -> Dataset {
        let mut x = vec![0.0f32; n];
        let mut y = vec![0.0f32; n];
        let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
        let chunk = n.div_ceil(threads).max(PARALLEL_CHUNK);
        std::thread::scope(|s| {
            let mut parts = x.chunks_mut(chunk).zip(y.chunks_mut(chunk)).enumerate();
            let first = parts.next();
            for (k, (xs, ys)) in parts {
                s.spawn(move || self.fill(k * chunk, n, seed, xs, ys));
            }
            // The calling thread makes the first chunk while the others run.
            if let Some((_, (xs, ys))) = first {
                self.fill(0, n, seed, xs, ys);
            }
        });
        Dataset {
            x,
            y,
            inputs: 1,
            outputs: 1,
        }
    }

    /// Points `from ..` of `n` into `x` and `y`.
    fn fill(self, from: usize, n: usize, seed: u64, x: &mut [f32], y: &mut [f32]) {
        let noise = self.noise();
        for (k, (xo, yo)) in x.iter_mut().zip(y.iter_mut()).enumerate() {
            let i = from + k;
            let xi = Task::x_at(i, n);
            let u = if noise > 0.0 {
                uniform(seed, stream::NOISE, i as u64)
            } else {
                0.0
            };
            *xo = xi as f32;
            *yo = (self.f(xi) + noise * u) as f32;
        }
    }
}

/// Points below which [`Task::generate`] uses one thread (a thread costs
/// more than making this many points).
const PARALLEL_CHUNK: usize = 1 << 16;

/// Row-major points: `x` is `n × inputs`, `y` is `n × outputs`.
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    /// Inputs, row-major.
    pub x: Vec<f32>,
    /// Targets, row-major.
    pub y: Vec<f32>,
    /// Inputs a point.
    pub inputs: usize,
    /// Targets a point.
    pub outputs: usize,
}

impl Dataset {
    /// Number of points.
    pub fn len(&self) -> usize {
        self.x.len() / self.inputs
    }

    /// True when there are no points.
    pub fn is_empty(&self) -> bool {
        self.x.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_task_matches_the_report() {
        let d = Task::X2Noise.generate(1001, 3);
        assert_eq!(d.len(), 1001);
        assert_eq!(d.x[0], -1.0);
        assert_eq!(d.x[1000], 1.0);
        assert!((d.x[500]).abs() < 1e-7);
        for (x, y) in d.x.iter().zip(&d.y) {
            let r = y - x * x;
            assert!((0.0..=0.3).contains(&r), "residual {r} outside U(0,0.3)");
        }
    }

    #[test]
    fn chunks_on_many_threads_make_the_same_points_as_one() {
        let n = 3 * PARALLEL_CHUNK + 17;
        let d = Task::Sin.generate(n, 9);
        let mut x = vec![0.0; n];
        let mut y = vec![0.0; n];
        Task::Sin.fill(0, n, 9, &mut x, &mut y);
        assert_eq!((d.x, d.y), (x, y));
    }

    #[test]
    fn unknown_task_names_the_choices() {
        let e = Task::parse("cubic").unwrap_err().to_string();
        assert!(e.contains("x2-noise") && e.contains("gauss-bumps"), "{e}");
    }
}
