//! Plots in the terminal: a loss curve (log scale) and horizontal speed bars,
//! plain Unicode text so they survive logs and pipes.

use crate::bench::stats::fmt_time;
use crate::engine::run::LossPoint;

/// The loss against step, `width × height` characters, log-scaled loss axis.
pub fn loss_chart(curve: &[LossPoint], width: usize, height: usize) -> String {
    let pts: Vec<&LossPoint> = curve
        .iter()
        .filter(|p| p.loss.is_finite() && p.loss > 0.0)
        .collect();
    if pts.len() < 2 {
        return "(too few loss points to plot)\n".into();
    }
    let (lo, hi) = pts
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
            (lo.min(p.loss.log10()), hi.max(p.loss.log10()))
        });
    let span = (hi - lo).max(1e-9);
    let (s0, s1) = (pts[0].step as f64, pts[pts.len() - 1].step as f64);
    let mut grid = vec![vec![' '; width]; height];
    for p in &pts {
        let x = (((p.step as f64 - s0) / (s1 - s0).max(1.0)) * (width - 1) as f64).round() as usize;
        let y = (((hi - p.loss.log10()) / span) * (height - 1) as f64).round() as usize;
        grid[y.min(height - 1)][x.min(width - 1)] = '•';
    }
    let mut out = String::new();
    for (i, row) in grid.iter().enumerate() {
        let label = match i {
            0 => format!("{:>10.3e} ┤", 10f64.powf(hi)),
            r if r == height - 1 => format!("{:>10.3e} ┤", 10f64.powf(lo)),
            _ => format!("{:>10} │", ""),
        };
        out += &format!("{label}{}\n", row.iter().collect::<String>());
    }
    out += &format!(
        "{:>11}└{}\n{:>12}step {}{:>w$}\n",
        "",
        "─".repeat(width),
        "",
        pts[0].step + 1,
        pts[pts.len() - 1].step + 1,
        w = width.saturating_sub(6 + (pts[0].step + 1).to_string().len())
    );
    out
}

/// One bar per (label, seconds), longest = `width`, on a log scale when the
/// times span more than a factor of 20.
pub fn bars(rows: &[(String, f64)], width: usize) -> String {
    let finite: Vec<f64> = rows
        .iter()
        .map(|r| r.1)
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    let (lo, hi) = finite.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &v| {
        (lo.min(v), hi.max(v))
    });
    if finite.is_empty() {
        return String::new();
    }
    let log = hi / lo > 20.0;
    let len = |v: f64| -> usize {
        let f = if log {
            (v / lo).log10() / (hi / lo).log10().max(1e-9) * 0.9 + 0.1
        } else {
            v / hi
        };
        ((f * width as f64).round() as usize).clamp(1, width)
    };
    let label_w = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
    let mut out = String::new();
    for (label, v) in rows {
        let bar = if v.is_finite() && *v > 0.0 {
            "█".repeat(len(*v))
        } else {
            String::new()
        };
        out += &format!("{label:<label_w$} │{bar} {}\n", fmt_time(*v));
    }
    if log {
        out += &format!("{:<label_w$}  (log scale)\n", "");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_chart_has_the_size_asked_and_marks_every_point() {
        let curve: Vec<LossPoint> = (0..10)
            .map(|i| LossPoint {
                val_loss: None,
                step: i,
                loss: 1.0 / (i + 1) as f64,
                seconds: 0.0,
            })
            .collect();
        let s = loss_chart(&curve, 40, 8);
        assert_eq!(s.lines().count(), 10);
        assert_eq!(s.matches('•').count(), 10);
        let b = bars(&[("fast".into(), 0.001), ("slow".into(), 1.0)], 30);
        let lens: Vec<usize> = b.lines().take(2).map(|l| l.matches('█').count()).collect();
        assert!(lens[0] < lens[1] && lens[1] == 30, "{b}");
        assert!(b.contains("log scale"));
    }
}
