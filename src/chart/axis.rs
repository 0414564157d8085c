//! One axis for every chart: linear or base-10 logarithmic, its ends widened
//! to round values, ticks a person would choose (1, 2 or 5 × 10ᵏ apart, or
//! whole decades) and labels in the data's unit (times as µs/ms/s).

/// What the values on an axis are, for their labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Seconds, labelled `250 µs`, `1.5 ms`, `2 s`.
    Seconds,
    /// Plain numbers, labelled with as many decimals as the tick step needs.
    Plain,
}

/// An axis over `[lo, hi]` (data units, not logarithms).
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// Lowest value shown.
    pub lo: f64,
    /// Highest value shown.
    pub hi: f64,
    /// Logarithmic scale.
    pub log: bool,
    /// Unit of the values.
    pub unit: Unit,
    /// Distance between linear ticks (unused on log axes).
    step: f64,
}

/// The round step (1, 2 or 5 × 10ᵏ) that cuts `span` into about `parts` pieces.
pub fn nice_step(span: f64, parts: f64) -> f64 {
    let raw = (span / parts).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let m = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

impl Axis {
    /// An axis covering the finite `values` (positive ones on a log axis).
    /// A linear axis over non-negative data starts at or above zero.
    pub fn over(values: impl Iterator<Item = f64>, log: bool, unit: Unit) -> Axis {
        let (lo, hi) = values
            .filter(|v| v.is_finite() && (!log || *v > 0.0))
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                (a.min(v), b.max(v))
            });
        let (lo, hi) = match (lo.is_finite(), log) {
            (false, true) => (1e-3, 1.0),
            (false, false) => (0.0, 1.0),
            _ => (lo, hi),
        };
        if log {
            let d0 = lo.log10().floor();
            let d1 = hi.log10().ceil().max(d0 + 1.0);
            return Axis {
                lo: 10f64.powf(d0),
                hi: 10f64.powf(d1),
                log,
                unit,
                step: 0.0,
            };
        }
        let (lo, hi) = if hi > lo {
            (lo, hi)
        } else {
            let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
            (
                (lo - pad).max(if lo >= 0.0 { 0.0 } else { f64::MIN }),
                hi + pad,
            )
        };
        let step = nice_step(hi - lo, 5.0);
        Axis {
            lo: (lo / step).floor() * step,
            hi: (hi / step).ceil() * step,
            log,
            unit,
            step,
        }
    }

    /// Position of `v` along the axis, 0 at `lo` and 1 at `hi`.
    pub fn frac(&self, v: f64) -> f64 {
        if self.log {
            (v.max(self.lo * 1e-3).log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }

    /// The tick values: round steps on a linear axis; decades on a log axis
    /// (with 2 and 5 between them when it spans at most two decades).
    pub fn ticks(&self) -> Vec<f64> {
        if self.log {
            let (d0, d1) = (
                self.lo.log10().round() as i32,
                self.hi.log10().round() as i32,
            );
            let between: &[f64] = if d1 - d0 <= 2 {
                &[1.0, 2.0, 5.0]
            } else {
                &[1.0]
            };
            (d0..=d1)
                .flat_map(|d| between.iter().map(move |m| m * 10f64.powi(d)))
                .filter(|v| *v <= self.hi * (1.0 + 1e-9))
                .collect()
        } else {
            let n = ((self.hi - self.lo) / self.step + 1e-9).floor() as i64;
            let first = (self.lo / self.step).ceil() as i64;
            (first..=first + n)
                .map(|k| k as f64 * self.step)
                .filter(|v| *v <= self.hi + self.step * 1e-9)
                .collect()
        }
    }

    /// The label of tick `v`.
    pub fn label(&self, v: f64) -> String {
        match self.unit {
            Unit::Seconds => time_tick(v),
            Unit::Plain if self.log => {
                if (1e-2..1e4).contains(&v.abs()) {
                    trim(format!("{v:.2}"))
                } else {
                    format!("{v:.0e}")
                }
            }
            Unit::Plain => {
                let decimals = (-self.step.log10().floor()).max(0.0) as usize;
                let v = if v.abs() < self.step * 1e-6 { 0.0 } else { v };
                format!("{v:.decimals$}")
            }
        }
    }
}

/// A time tick: `0`, `50 µs`, `2.5 ms`, `1 s`.
fn time_tick(v: f64) -> String {
    let (x, unit) = match v.abs() {
        0.0 => return "0".into(),
        a if a < 1e-3 => (v * 1e6, "µs"),
        a if a < 1.0 => (v * 1e3, "ms"),
        _ => (v, "s"),
    };
    format!("{} {unit}", trim(format!("{x:.2}")))
}

/// `0.50` → `0.5`, `2.00` → `2`.
fn trim(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_ticks_fall_on_round_values() {
        let a = Axis::over([4.304, 9.811, 22.361].into_iter(), false, Unit::Plain);
        assert_eq!(a.ticks(), vec![0.0, 5.0, 10.0, 15.0, 20.0, 25.0]);
        let labels: Vec<String> = a.ticks().iter().map(|v| a.label(*v)).collect();
        assert_eq!(labels, ["0", "5", "10", "15", "20", "25"]);
        let b = Axis::over([-0.061, 0.43].into_iter(), false, Unit::Plain);
        assert_eq!(b.label(b.ticks()[0]), "-0.1");
        assert!(b.ticks().contains(&0.0));
    }

    #[test]
    fn non_negative_data_never_gets_a_negative_axis() {
        let a = Axis::over([7.21e-5, 7.21e-5].into_iter(), false, Unit::Seconds);
        assert!(a.lo >= 0.0, "{a:?}");
        let t = Axis::over([3.0e-5, 9.0e-5].into_iter(), false, Unit::Seconds);
        assert!(t.ticks().iter().all(|v| *v >= 0.0));
        assert_eq!(t.label(5e-5), "50 µs");
        assert_eq!(t.label(2.5e-3), "2.5 ms");
    }

    #[test]
    fn log_axes_span_whole_decades() {
        let a = Axis::over([1.3e-3, 0.4].into_iter(), true, Unit::Seconds);
        assert_eq!((a.lo, a.hi), (1e-3, 1.0));
        assert_eq!(a.ticks(), vec![1e-3, 1e-2, 1e-1, 1.0]);
        let b = Axis::over([0.012, 0.05].into_iter(), true, Unit::Plain);
        assert_eq!(b.ticks(), vec![0.01, 0.02, 0.05, 0.1]);
        assert_eq!(b.label(0.02), "0.02");
        assert!((a.frac(1e-3)).abs() < 1e-12 && (a.frac(1.0) - 1.0).abs() < 1e-12);
    }
}
