//! Small inline-SVG charts for the HTML report: lines (optionally log–log),
//! horizontal bars with whiskers, and histograms. Text and axes use
//! `currentColor`, so the charts follow the page's light or dark theme.

use super::axis::{Axis, Unit};
use super::{escape, row_color, PALETTE};

const W: f64 = 640.0;
const H: f64 = 260.0;
/// Left margin: tick labels and the y-axis title.
const L: f64 = 84.0;
const B: f64 = 30.0;
/// Right margin, so the last tick label is never clipped.
const R: f64 = 24.0;

fn px(a: &Axis, x: f64) -> f64 {
    L + a.frac(x) * (W - L - R)
}

fn py(a: &Axis, y: f64) -> f64 {
    10.0 + (1.0 - a.frac(y)) * (H - B - 10.0)
}

/// The chart's frame: plot area, ticks and grid at the axes' round values,
/// and both axis titles.
fn frame(id: &str, title: &str, xa: &Axis, ya: &Axis, titles: (&str, &str)) -> String {
    let mut s = format!(
        "<svg id=\"{}\" class=\"chart\" viewBox=\"0 0 {W} {}\" role=\"img\" aria-label=\"{t}\"><title>{t}</title>\
         <rect x=\"{L}\" y=\"10\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"currentColor\" stroke-opacity=\"0.4\"/>",
        escape(id),
        H + 20.0,
        W - L - R,
        H - B - 10.0,
        t = escape(title)
    );
    for v in xa.ticks() {
        let x = px(xa, v);
        s += &format!(
            "<line x1=\"{x:.1}\" y1=\"10\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"currentColor\" stroke-opacity=\"0.1\"/>\
             <text x=\"{x:.1}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\" fill=\"currentColor\">{}</text>",
            H - B,
            H - B + 16.0,
            escape(&xa.label(v))
        );
    }
    for v in ya.ticks() {
        let y = py(ya, v);
        s += &format!(
            "<line x1=\"{L}\" y1=\"{y:.1}\" x2=\"{}\" y2=\"{y:.1}\" stroke=\"currentColor\" stroke-opacity=\"0.1\"/>\
             <text x=\"{}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\" fill=\"currentColor\">{}</text>",
            W - R,
            L - 4.0,
            y + 4.0,
            escape(&ya.label(v))
        );
    }
    let mid_y = 10.0 + (H - B - 10.0) / 2.0;
    s + &format!(
        "<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\" fill=\"currentColor\">{}</text>\
         <text x=\"14\" y=\"{mid_y}\" font-size=\"12\" text-anchor=\"middle\" fill=\"currentColor\" transform=\"rotate(-90 14 {mid_y})\">{}</text>",
        L + (W - L - R) / 2.0,
        H + 12.0,
        escape(titles.0),
        escape(titles.1)
    )
}

/// One polyline per series, with a legend; `log` sets each axis
/// logarithmic, `units` says what each axis holds, `titles` names them.
pub fn lines(
    id: &str,
    title: &str,
    series: &[(String, Vec<(f64, f64)>)],
    log: (bool, bool),
    units: (Unit, Unit),
    titles: (&str, &str),
) -> String {
    let xa = Axis::over(
        series.iter().flat_map(|s| s.1.iter().map(|p| p.0)),
        log.0,
        units.0,
    );
    let ya = Axis::over(
        series.iter().flat_map(|s| s.1.iter().map(|p| p.1)),
        log.1,
        units.1,
    );
    let mut s = frame(id, title, &xa, &ya, titles);
    for (i, (name, pts)) in series.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        let path: Vec<String> = pts
            .iter()
            .filter(|p| {
                p.0.is_finite() && p.1.is_finite() && (!log.0 || p.0 > 0.0) && (!log.1 || p.1 > 0.0)
            })
            .map(|p| format!("{:.1},{:.1}", px(&xa, p.0), py(&ya, p.1)))
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

fn dots(xa: &Axis, ya: &Axis, data: &[(f64, f64)]) -> String {
    data.iter()
        .filter(|p| p.0.is_finite() && p.1.is_finite())
        .map(|p| {
            format!(
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"1.5\" fill=\"currentColor\" fill-opacity=\"0.35\"/>",
                px(xa, p.0),
                py(ya, p.1)
            )
        })
        .collect()
}

fn polyline(xa: &Axis, ya: &Axis, pts: &[(f64, f64)], color: &str) -> String {
    let path: Vec<String> = pts
        .iter()
        .map(|p| format!("{:.1},{:.1}", px(xa, p.0), py(ya, p.1)))
        .collect();
    format!(
        "<polyline class=\"series\" points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"/>",
        path.join(" ")
    )
}

/// Scatter of `data` points with a fitted curve on top.
pub fn fit(id: &str, title: &str, data: &[(f64, f64)], curve: &[(f64, f64)]) -> String {
    let xa = Axis::over(data.iter().chain(curve).map(|p| p.0), false, Unit::Plain);
    let ya = Axis::over(data.iter().chain(curve).map(|p| p.1), false, Unit::Plain);
    frame(id, title, &xa, &ya, ("x", "y"))
        + &dots(&xa, &ya, data)
        + &polyline(&xa, &ya, curve, PALETTE[1])
        + "</svg>"
}

/// Predicted against actual values: the points, and the diagonal where a
/// perfect model's would lie (both axes over the same range).
pub fn predicted_vs_actual(id: &str, title: &str, pts: &[(f64, f64)], target: &str) -> String {
    let all = || pts.iter().flat_map(|p| [p.0, p.1]);
    let xa = Axis::over(all(), false, Unit::Plain);
    let ya = Axis::over(all(), false, Unit::Plain);
    let diagonal = [(xa.lo, xa.lo), (xa.hi, xa.hi)];
    let titles = (format!("actual {target}"), format!("predicted {target}"));
    frame(id, title, &xa, &ya, (&titles.0, &titles.1))
        + &polyline(&xa, &ya, &diagonal, PALETTE[1])
        + &dots(&xa, &ya, pts)
        + "</svg>"
}

/// Residuals (predicted − actual) against the prediction, with the zero line:
/// a trend or a funnel here is what a model left unexplained.
pub fn residuals(id: &str, title: &str, pts: &[(f64, f64)], target: &str) -> String {
    let res: Vec<(f64, f64)> = pts.iter().map(|&(a, p)| (p, p - a)).collect();
    let xa = Axis::over(res.iter().map(|p| p.0), false, Unit::Plain);
    let ya = Axis::over(res.iter().map(|p| p.1).chain([0.0]), false, Unit::Plain);
    let zero = [(xa.lo, 0.0), (xa.hi, 0.0)];
    let titles = (
        format!("predicted {target}"),
        "predicted − actual".to_string(),
    );
    frame(id, title, &xa, &ya, (&titles.0, &titles.1))
        + &polyline(&xa, &ya, &zero, PALETTE[1])
        + &dots(&xa, &ya, &res)
        + "</svg>"
}

/// Horizontal bars (median) with min…max whiskers, log time axis.
pub fn bars(id: &str, title: &str, rows: &[(String, f64, f64, f64)]) -> String {
    let xa = Axis::over(rows.iter().flat_map(|r| [r.2, r.3]), true, Unit::Seconds);
    let row_h = 24.0;
    let h = 20.0 + row_h * rows.len() as f64 + 30.0;
    let left = 260.0;
    let right = 80.0;
    let px = |x: f64| left + xa.frac(x) * (W - left - right);
    let mut s = format!(
        "<svg id=\"{}\" class=\"chart\" viewBox=\"0 0 {W} {h}\" role=\"img\" aria-label=\"{t}\"><title>{t}</title>",
        escape(id),
        t = escape(title)
    );
    for (i, (name, median, lo, hi)) in rows.iter().enumerate() {
        let y = 10.0 + row_h * i as f64;
        let c = row_color(name);
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
                escape(&xa.label(*median)),
                m = y + row_h / 2.0
            );
        }
    }
    let axis_y = 10.0 + row_h * rows.len() as f64;
    for v in xa.ticks() {
        s += &format!(
            "<line x1=\"{x:.1}\" y1=\"10\" x2=\"{x:.1}\" y2=\"{axis_y}\" stroke=\"currentColor\" stroke-opacity=\"0.1\"/>\
             <text x=\"{x:.1}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\" fill=\"currentColor\">{}</text>",
            axis_y + 14.0,
            escape(&xa.label(v)),
            x = px(v)
        );
    }
    s + &format!(
        "<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"currentColor\">time for the whole job, log scale; whiskers min … max</text></svg>",
        left,
        h - 4.0
    )
}

/// A histogram of per-step seconds in `bins` bins. The range stops at
/// Tukey's far fences (quartiles ± 3 × the interquartile range) so one slow
/// step cannot squeeze the rest into one bar; steps outside are counted in
/// the title.
pub fn histogram(id: &str, title: &str, values: &[f64], bins: usize) -> String {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let pct = |q: f64| crate::bench::stats::percentile(&sorted, q);
    let (q1, q3) = (pct(0.25), pct(0.75));
    let iqr = q3 - q1;
    let (lo, hi) = (
        (q1 - 3.0 * iqr).max(pct(0.0)),
        (q3 + 3.0 * iqr).min(pct(1.0)),
    );
    let xa = Axis::over([lo, hi].into_iter(), false, Unit::Seconds);
    let width = (xa.hi - xa.lo) / bins.max(1) as f64;
    let mut counts = vec![0usize; bins.max(1)];
    let mut outside = 0usize;
    for v in &sorted {
        if *v < xa.lo || *v > xa.hi {
            outside += 1;
            continue;
        }
        let last = counts.len() - 1;
        let b = ((v - xa.lo) / width) as usize;
        counts[b.min(last)] += 1;
    }
    let top = *counts.iter().max().unwrap_or(&1) as f64;
    let ya = Axis::over([0.0, top.max(1.0)].into_iter(), false, Unit::Plain);
    let mut s = frame(id, title, &xa, &ya, ("seconds per step", "steps"));
    let bw = (W - L - R) / counts.len() as f64;
    for (i, c) in counts.iter().enumerate() {
        let y = py(&ya, *c as f64);
        s += &format!(
            "<rect class=\"bar\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"/>",
            L + bw * i as f64,
            y,
            (bw - 1.0).max(0.5),
            (H - B - y).max(0.0),
            PALETTE[0]
        );
    }
    if outside > 0 {
        s += &format!(
            "<text x=\"{}\" y=\"26\" font-size=\"11\" text-anchor=\"end\" fill=\"currentColor\">{outside} outlying step(s) beyond the axis, not drawn</text>",
            W - R - 6.0
        );
    }
    s + "</svg>"
}
