//! `--plot FILE.svg`: the bench as horizontal bars (median, whiskers min … max)
//! on a logarithmic time axis, in a self-contained SVG. Every label is escaped.

use super::export::BenchRecord;
use super::stats::fmt_time;

/// Escapes text for SVG/XML.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// The SVG document.
pub fn svg(rec: &BenchRecord) -> String {
    let (label_w, bar_w, row_h, top) = (360.0, 520.0, 26.0, 40.0);
    let rows = &rec.rows;
    let finite = |v: f64| v.is_finite() && v > 0.0;
    let lo = rows
        .iter()
        .map(|r| r.summary.min)
        .filter(|v| finite(*v))
        .fold(f64::INFINITY, f64::min);
    let hi = rows
        .iter()
        .map(|r| r.summary.max)
        .filter(|v| finite(*v))
        .fold(0.0, f64::max);
    let (l0, l1) = if lo.is_finite() && hi > 0.0 {
        (
            lo.log10().floor(),
            hi.log10().ceil().max(lo.log10().floor() + 1.0),
        )
    } else {
        (-3.0, 0.0)
    };
    let x = |v: f64| label_w + bar_w * ((v.max(10f64.powf(l0)).log10() - l0) / (l1 - l0));
    let height = top + row_h * rows.len() as f64 + 40.0;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"10\" y=\"20\" font-size=\"14\">{title}</text>\n",
        w = label_w + bar_w + 120.0,
        title = escape(&format!("{} n={} hidden={} — time per {} steps (log scale), median and min…max", rec.config.task, rec.config.n, rec.config.model.hidden, rec.config.steps)),
    );
    for d in (l0 as i32)..=(l1 as i32) {
        let xv = x(10f64.powi(d));
        out += &format!("<line x1=\"{xv}\" y1=\"{top}\" x2=\"{xv}\" y2=\"{}\" stroke=\"#ddd\"/><text x=\"{xv}\" y=\"{}\" text-anchor=\"middle\" fill=\"#666\">{}</text>\n", height - 30.0, height - 15.0, escape(&fmt_time(10f64.powi(d))));
    }
    for (i, r) in rows.iter().enumerate() {
        let y = top + row_h * i as f64;
        let s = &r.summary;
        let color = if r.name.starts_with("ferrofit") {
            "#2b6cb0"
        } else {
            "#a0aec0"
        };
        out += &format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n",
            label_w - 8.0,
            y + 16.0,
            escape(&format!("{} · {}", r.name, r.backend))
        );
        if finite(s.median) {
            out += &format!(
                "<rect x=\"{label_w}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{color}\"/>\n",
                y + 4.0,
                (x(s.median) - label_w).max(1.0),
                row_h - 8.0
            );
            out += &format!(
                "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n",
                x(s.min),
                y + row_h / 2.0,
                x(s.max),
                y + row_h / 2.0
            );
            out += &format!(
                "<text x=\"{}\" y=\"{}\">{}</text>\n",
                x(s.max) + 6.0,
                y + 16.0,
                escape(&fmt_time(s.median))
            );
        }
    }
    out + "</svg>\n"
}
