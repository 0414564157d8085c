//! Statistics a benchmarker trusts: median, mean ± σ, min … max, percentiles,
//! coefficient of variation, relative speed with σ propagated, and outliers
//! counted as hyperfine counts them (modified Z-score).

use serde::{Deserialize, Serialize};

/// Summary of a set of timings (seconds).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    /// Timed runs.
    pub runs: usize,
    /// Median, seconds.
    pub median: f64,
    /// Mean, seconds.
    pub mean: f64,
    /// Sample standard deviation (n - 1).
    pub stddev: f64,
    /// Fastest, seconds.
    pub min: f64,
    /// Slowest, seconds.
    pub max: f64,
    /// 95th percentile, seconds.
    pub p95: f64,
    /// 99th percentile, seconds.
    pub p99: f64,
    /// stddev / mean: the run-to-run "jitter".
    pub cv: f64,
}

/// Linear-interpolated percentile `q` in [0, 1] of sorted data.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

impl Summary {
    /// Summarises `samples` (any order). Empty input gives NaNs and `runs == 0`.
    pub fn of(samples: &[f64]) -> Summary {
        let mut s = samples.to_vec();
        s.sort_by(|a, b| a.total_cmp(b));
        let n = s.len();
        let mean = s.iter().sum::<f64>() / n.max(1) as f64;
        let var = if n > 1 {
            s.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        let stddev = var.sqrt();
        Summary {
            runs: n,
            median: percentile(&s, 0.5),
            mean: if n == 0 { f64::NAN } else { mean },
            stddev,
            min: s.first().copied().unwrap_or(f64::NAN),
            max: s.last().copied().unwrap_or(f64::NAN),
            p95: percentile(&s, 0.95),
            p99: percentile(&s, 0.99),
            cv: if mean > 0.0 { stddev / mean } else { f64::NAN },
        }
    }
}

/// How many times faster `row` is than `baseline` (mean over mean), with the
/// uncertainty propagated from both standard deviations.
pub fn relative_speed(baseline: &Summary, row: &Summary) -> (f64, f64) {
    let ratio = baseline.mean / row.mean;
    let rel = ((baseline.stddev / baseline.mean).powi(2) + (row.stddev / row.mean).powi(2)).sqrt();
    (ratio, ratio * rel)
}

/// Modified Z-score beyond which a sample is an outlier (hyperfine's).
pub const OUTLIER_Z: f64 = 14.826;

/// How many of `samples` are outliers: modified Z-score |x − median| /
/// (1.4826 · MAD) beyond [`OUTLIER_Z`]. Robust where σ is not: a stall does
/// not hide itself by inflating the spread it is measured against. The
/// spread is taken as at least a millionth of the median, so samples that
/// are equal but for rounding (a MAD of 0) do not count.
pub fn outliers(samples: &[f64]) -> usize {
    let mut s = samples.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let median = percentile(&s, 0.5);
    let mut dev: Vec<f64> = s.iter().map(|x| (x - median).abs()).collect();
    dev.sort_by(|a, b| a.total_cmp(b));
    let sigma = (1.4826 * percentile(&dev, 0.5)).max(median.abs() * 1e-6);
    dev.iter()
        .filter(|&&d| {
            if sigma > 0.0 {
                d / sigma > OUTLIER_Z
            } else {
                d > 0.0
            }
        })
        .count()
}

/// A duration in the unit that reads best (µs, ms or s).
pub fn fmt_time(s: f64) -> String {
    if !s.is_finite() {
        "—".into()
    } else if s < 1e-3 {
        format!("{:.1} µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.3} s", s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_known_samples() {
        let s = Summary::of(&[4.0, 1.0, 3.0, 2.0, 5.0]);
        assert_eq!(
            (s.runs, s.median, s.mean, s.min, s.max),
            (5, 3.0, 3.0, 1.0, 5.0)
        );
        assert!((s.stddev - 2.5f64.sqrt()).abs() < 1e-12);
        assert!((s.p95 - 4.8).abs() < 1e-12);
        assert!((s.cv - 2.5f64.sqrt() / 3.0).abs() < 1e-12);
    }

    #[test]
    fn relative_speed_propagates_uncertainty() {
        let base = Summary {
            runs: 3,
            median: 2.0,
            mean: 2.0,
            stddev: 0.2,
            min: 1.8,
            max: 2.2,
            p95: 2.2,
            p99: 2.2,
            cv: 0.1,
        };
        let fast = Summary {
            mean: 1.0,
            stddev: 0.1,
            ..base.clone()
        };
        let (r, sigma) = relative_speed(&base, &fast);
        assert_eq!(r, 2.0);
        assert!((sigma - 2.0 * (0.01f64 + 0.01).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn outliers_are_counted_robustly() {
        let mut steps = vec![1.0e-4; 50];
        steps
            .iter_mut()
            .enumerate()
            .for_each(|(i, x)| *x += i as f64 * 1e-7);
        assert_eq!(outliers(&steps), 0);
        steps.push(1.4e-3);
        steps.push(2.0e-3);
        assert_eq!(outliers(&steps), 2);
        assert_eq!(outliers(&[1.0, 1.0, 1.0, 3.0]), 1);
        assert_eq!(outliers(&[]), 0);
    }

    #[test]
    fn units_are_chosen_automatically() {
        assert_eq!(fmt_time(2.5e-5), "25.0 µs");
        assert_eq!(fmt_time(0.0123), "12.30 ms");
        assert_eq!(fmt_time(3.0), "3.000 s");
    }
}
