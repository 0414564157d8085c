//! Small inline-SVG charts for the HTML report: lines (optionally log–log),
//! horizontal bars with whiskers, and histograms. Text and axes use
//! `currentColor`, so the charts follow the page's light or dark theme.

use crate::bench::plot::escape;

const W: f64 = 640.0;
const H: f64 = 260.0;
const L: f64 = 70.0;
const B: f64 = 30.0;
pub const PALETTE: [&str; 6] = [
    "#3182ce", "#dd6b20", "#38a169", "#805ad5", "#d53f8c", "#718096",
];

/// An axis: linear or base-10 logarithmic over the data's range.
struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
}

impl Axis {
    fn over(v: impl Iterator<Item = f64>, log: bool) -> Axis {
        let t = |x: f64| if log { x.log10() } else { x };
        let (lo, hi) = v
            .filter(|x| x.is_finite() && (!log || *x > 0.0))
            .map(t)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
                (a.min(x), b.max(x))
            });
        let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
        let pad = ((hi - lo) * 0.05).max(1e-9);
        Axis {
            lo: lo - pad,
            hi: hi + pad,
            log,
        }
    }
    fn frac(&self, x: f64) -> f64 {
        let x = if self.log { x.max(1e-300).log10() } else { x };
        (x - self.lo) / (self.hi - self.lo)
    }
    fn label(&self, f: f64) -> String {
        let v = self.lo + f * (self.hi - self.lo);
        let v = if self.log { 10f64.powf(v) } else { v };
        if v != 0.0 && v.abs() < 0.01 {
            format!("{v:.2e}")
        } else {
            format!("{v:.3}")
        }
    }
}

fn frame(id: &str, title: &str, xa: &Axis, ya: &Axis, xlabel: &str) -> String {
    let mut s = format!(
        "<svg id=\"{}\" class=\"chart\" viewBox=\"0 0 {W} {}\" role=\"img\" aria-label=\"{t}\"><title>{t}</title>\
         <rect x=\"{L}\" y=\"10\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"currentColor\" stroke-opacity=\"0.4\"/>",
        escape(id),
        H + 20.0,
        W - L - 10.0,
        H - B - 10.0,
        t = escape(title)
    );
    for i in 0..=4 {
        let f = i as f64 / 4.0;
        let x = L + f * (W - L - 10.0);
        let y = 10.0 + (1.0 - f) * (H - B - 10.0);
        s += &format!(
            "<text x=\"{x}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\" fill=\"currentColor\">{}</text>\
             <text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\" fill=\"currentColor\">{}</text>",
            H - B + 16.0,
            escape(&xa.label(f)),
            L - 4.0,
            y + 4.0,
            escape(&ya.label(f))
        );
    }
    s + &format!(
        "<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\" fill=\"currentColor\">{}</text>",
        L + (W - L) / 2.0,
        H + 12.0,
        escape(xlabel)
    )
}

/// One polyline per series, with a legend; `log` sets both axes logarithmic.
pub fn lines(
    id: &str,
    title: &str,
    series: &[(String, Vec<(f64, f64)>)],
    log: (bool, bool),
    xlabel: &str,
) -> String {
    let xa = Axis::over(series.iter().flat_map(|s| s.1.iter().map(|p| p.0)), log.0);
    let ya = Axis::over(series.iter().flat_map(|s| s.1.iter().map(|p| p.1)), log.1);
    let mut s = frame(id, title, &xa, &ya, xlabel);
    for (i, (name, pts)) in series.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        let path: Vec<String> = pts
            .iter()
            .filter(|p| {
                p.0.is_finite() && p.1.is_finite() && (!log.0 || p.0 > 0.0) && (!log.1 || p.1 > 0.0)
            })
            .map(|p| {
                format!(
                    "{:.1},{:.1}",
                    L + xa.frac(p.0) * (W - L - 10.0),
                    10.0 + (1.0 - ya.frac(p.1)) * (H - B - 10.0)
                )
            })
            .collect();
        s += &format!(
            "<polyline class=\"series\" points=\"{}\" fill=\"none\" stroke=\"{c}\" stroke-width=\"1.6\"/>\
             <text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"{c}\">{}</text>",
            path.join(" "),
            L + 8.0,
            24.0 + 14.0 * i as f64,
            escape(name)
        );
    }
    s + "</svg>"
}

/// Scatter of `data` points with a fitted curve on top.
pub fn fit(id: &str, title: &str, data: &[(f64, f64)], curve: &[(f64, f64)]) -> String {
    let xa = Axis::over(data.iter().chain(curve).map(|p| p.0), false);
    let ya = Axis::over(data.iter().chain(curve).map(|p| p.1), false);
    let px = |x: f64| L + xa.frac(x) * (W - L - 10.0);
    let py = |y: f64| 10.0 + (1.0 - ya.frac(y)) * (H - B - 10.0);
    let mut s = frame(id, title, &xa, &ya, "x");
    for p in data {
        s += &format!("<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"1.5\" fill=\"currentColor\" fill-opacity=\"0.35\"/>", px(p.0), py(p.1));
    }
    let path: Vec<String> = curve
        .iter()
        .map(|p| format!("{:.1},{:.1}", px(p.0), py(p.1)))
        .collect();
    s + &format!(
        "<polyline class=\"series\" points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/></svg>",
        path.join(" "),
        PALETTE[1]
    )
}

/// Horizontal bars (median) with min…max whiskers, log time axis.
pub fn bars(id: &str, title: &str, rows: &[(String, f64, f64, f64)]) -> String {
    let xa = Axis::over(rows.iter().flat_map(|r| [r.2, r.3]), true);
    let row_h = 24.0;
    let h = 20.0 + row_h * rows.len() as f64 + 30.0;
    let left = 260.0;
    let px = |x: f64| left + xa.frac(x) * (W - left - 70.0);
    let mut s = format!(
        "<svg id=\"{}\" class=\"chart\" viewBox=\"0 0 {W} {h}\" role=\"img\" aria-label=\"{t}\"><title>{t}</title>",
        escape(id),
        t = escape(title)
    );
    for (i, (name, median, lo, hi)) in rows.iter().enumerate() {
        let y = 10.0 + row_h * i as f64;
        let c = if name.starts_with("ferrofit") {
            PALETTE[0]
        } else {
            PALETTE[5]
        };
        s += &format!(
            "<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"end\" fill=\"currentColor\">{}</text>",
            left - 6.0,
            y + 15.0,
            escape(name)
        );
        if median.is_finite() && *median > 0.0 {
            s += &format!(
                "<rect class=\"bar\" x=\"{left}\" y=\"{}\" width=\"{:.1}\" height=\"{}\" fill=\"{c}\"/>\
                 <line x1=\"{:.1}\" y1=\"{m}\" x2=\"{:.1}\" y2=\"{m}\" stroke=\"currentColor\"/>\
                 <text x=\"{:.1}\" y=\"{}\" font-size=\"11\" fill=\"currentColor\">{}</text>",
                y + 4.0,
                (px(*median) - left).max(1.0),
                row_h - 8.0,
                px(*lo),
                px(*hi),
                px(*hi) + 4.0,
                y + 15.0,
                escape(&crate::bench::stats::fmt_time(*median)),
                m = y + row_h / 2.0
            );
        }
    }
    s + &format!(
        "<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"currentColor\">time for the whole job, log scale; whiskers min … max</text></svg>",
        left,
        h - 8.0
    )
}

/// A histogram of `values` in `bins` equal bins.
pub fn histogram(id: &str, title: &str, values: &[f64], bins: usize) -> String {
    let xa = Axis::over(values.iter().copied(), false);
    let mut counts = vec![0usize; bins];
    for v in values.iter().filter(|v| v.is_finite()) {
        let b = (xa.frac(*v) * bins as f64) as usize;
        counts[b.min(bins - 1)] += 1;
    }
    let top = *counts.iter().max().unwrap_or(&1) as f64;
    let ya = Axis {
        lo: 0.0,
        hi: top.max(1.0),
        log: false,
    };
    let mut s = frame(id, title, &xa, &ya, "seconds per step");
    let bw = (W - L - 10.0) / bins as f64;
    for (i, c) in counts.iter().enumerate() {
        let h = (*c as f64 / ya.hi) * (H - B - 10.0);
        s += &format!(
            "<rect class=\"bar\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"/>",
            L + bw * i as f64,
            H - B - h,
            (bw - 1.0).max(0.5),
            h,
            PALETTE[0]
        );
    }
    s + "</svg>"
}
