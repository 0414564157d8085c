//! `--plot FILE.svg|png`: the bench as a self-contained picture. Top panel:
//! horizontal bars (median, whiskers min … max) on a logarithmic time axis.
//! Bottom panel: loss against time for every ferrofit row (log–log), from the
//! run synced after every step. Every label is escaped; PNG is the same SVG
//! rasterised with resvg and the system's fonts.

use super::axis::{Axis, Unit};
use super::{escape, row_color, PALETTE};
use crate::bench::export::BenchRecord;
use crate::engine::run::LossPoint;
use crate::error::{FerroError, Result};
use crate::io::write_atomic;
use std::path::Path;

const LABEL_W: f64 = 360.0;
const PLOT_W: f64 = 520.0;
const ROW_H: f64 = 26.0;
const TOP: f64 = 40.0;
const CURVE_H: f64 = 240.0;

/// One bar of the picture: a timed row of a bench.
pub struct Row<'a> {
    /// `ferrofit fused`, `jax jit`, ...
    pub name: &'a str,
    /// The backend and device it ran on.
    pub backend: &'a str,
    /// Median time, seconds.
    pub median: f64,
    /// Fastest run, seconds.
    pub min: f64,
    /// Slowest run, seconds.
    pub max: f64,
    /// Loss against time (empty for peers): the lower panel.
    pub curve: &'a [LossPoint],
}

/// The SVG document: `title` above the bars of `rows`.
pub fn svg(title: &str, rows: &[Row]) -> String {
    let bars_bottom = TOP + ROW_H * rows.len() as f64;
    let curves: Vec<_> = rows.iter().filter(|r| r.curve.len() > 1).collect();
    let curve_top = bars_bottom + 60.0;
    let height = if curves.is_empty() {
        bars_bottom + 40.0
    } else {
        curve_top + CURVE_H + 50.0
    };
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{height}\" font-family=\"DejaVu Sans, sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"10\" y=\"20\" font-size=\"14\">{title}</text>\n",
        w = LABEL_W + PLOT_W + 200.0,
        title = escape(title),
    );
    let t_axis = Axis::over(
        rows.iter().flat_map(|r| [r.min, r.max]),
        true,
        Unit::Seconds,
    );
    let x = |v: f64| LABEL_W + PLOT_W * t_axis.frac(v);
    for d in t_axis.ticks() {
        out += &format!(
            "<line x1=\"{0}\" y1=\"{TOP}\" x2=\"{0}\" y2=\"{1}\" stroke=\"#ddd\"/><text x=\"{0}\" y=\"{2}\" text-anchor=\"middle\" fill=\"#666\">{3}</text>\n",
            x(d),
            bars_bottom + 5.0,
            bars_bottom + 20.0,
            escape(&t_axis.label(d))
        );
    }
    for (i, r) in rows.iter().enumerate() {
        let y = TOP + ROW_H * i as f64;
        let color = row_color(r.name);
        out += &format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n",
            LABEL_W - 8.0,
            y + 16.0,
            escape(&format!("{} · {}", r.name, r.backend))
        );
        if r.median.is_finite() && r.median > 0.0 {
            let (mid, y0) = (y + ROW_H / 2.0, y + 4.0);
            let (w, bh) = ((x(r.median) - LABEL_W).max(1.0), ROW_H - 8.0);
            let (x0, x1, ty) = (x(r.min), x(r.max), y + 16.0);
            out += &format!(
                "<rect x=\"{LABEL_W}\" y=\"{y0}\" width=\"{w}\" height=\"{bh}\" fill=\"{color}\"/>\n\
                 <line x1=\"{x0}\" y1=\"{mid}\" x2=\"{x1}\" y2=\"{mid}\" stroke=\"black\"/>\n\
                 <text x=\"{tx}\" y=\"{ty}\">{label}</text>\n",
                tx = x1 + 6.0,
                label = escape(&crate::bench::stats::fmt_time(r.median)),
            );
        }
    }
    if !curves.is_empty() {
        out += &loss_panel(&curves, curve_top);
    }
    out + "</svg>\n"
}

/// Loss against seconds, one polyline per ferrofit row, with a legend.
fn loss_panel(rows: &[&Row], top: f64) -> String {
    let points = || rows.iter().flat_map(|r| r.curve.iter());
    let tx = Axis::over(points().map(|p| p.seconds), true, Unit::Seconds);
    let ly = Axis::over(points().map(|p| p.loss), true, Unit::Plain);
    let (left, w, h) = (LABEL_W, PLOT_W, CURVE_H);
    let px = |s: f64| left + w * tx.frac(s);
    let py = |l: f64| top + h * (1.0 - ly.frac(l));
    let mut out = format!(
        "<text x=\"10\" y=\"{}\" font-size=\"14\">loss against time (log–log; synced every step)</text>\n\
         <rect x=\"{left}\" y=\"{top}\" width=\"{w}\" height=\"{h}\" fill=\"none\" stroke=\"#999\"/>\n",
        top - 14.0
    );
    for d in tx.ticks() {
        out += &format!(
            "<line x1=\"{0}\" y1=\"{top}\" x2=\"{0}\" y2=\"{1}\" stroke=\"#eee\"/><text x=\"{0}\" y=\"{2}\" text-anchor=\"middle\" fill=\"#666\">{3}</text>\n",
            px(d),
            top + h,
            top + h + 16.0,
            escape(&tx.label(d))
        );
    }
    for d in ly.ticks() {
        out += &format!(
            "<line x1=\"{left}\" y1=\"{0}\" x2=\"{1}\" y2=\"{0}\" stroke=\"#eee\"/><text x=\"{2}\" y=\"{3}\" text-anchor=\"end\" fill=\"#666\">{4}</text>\n",
            py(d),
            left + w,
            left - 6.0,
            py(d) + 4.0,
            escape(&ly.label(d))
        );
    }
    for (i, r) in rows.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let pts: Vec<String> = r
            .curve
            .iter()
            .filter(|p| p.seconds > 0.0 && p.loss.is_finite() && p.loss > 0.0)
            .map(|p| format!("{:.1},{:.1}", px(p.seconds), py(p.loss)))
            .collect();
        out += &format!(
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\"/>\n\
             <rect x=\"{}\" y=\"{}\" width=\"12\" height=\"3\" fill=\"{color}\"/><text x=\"{}\" y=\"{}\">{}</text>\n",
            pts.join(" "),
            left + w + 10.0,
            top + 10.0 + 16.0 * i as f64,
            left + w + 26.0,
            top + 14.0 + 16.0 * i as f64,
            escape(&format!("{} · {}", r.name.trim_start_matches("ferrofit "), r.backend))
        );
    }
    out
}

/// The picture as PNG (the SVG rasterised, system fonts for the text).
pub fn png(title: &str, rows: &[Row]) -> Result<Vec<u8>> {
    let mut opt = resvg::usvg::Options::default();
    opt.fontdb_mut().load_system_fonts();
    let tree = resvg::usvg::Tree::from_str(&svg(title, rows), &opt)
        .map_err(|e| FerroError::Plot(e.to_string()))?;
    let size = tree.size().to_int_size();
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or_else(|| FerroError::Plot("it has no area".into()))?;
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .map_err(|e| FerroError::Plot(format!("PNG encoding: {e}")))
}

/// SVG or PNG bytes, by the file's extension.
pub fn render_for(path: &Path, title: &str, rows: &[Row]) -> Result<Vec<u8>> {
    match path.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("png") => png(title, rows),
        _ => Ok(svg(title, rows).into_bytes()),
    }
}

/// Writes `--plot FILE` for a bench (SVG, or PNG by the file's extension),
/// atomically.
pub fn write_bench(path: &Path, rec: &BenchRecord) -> Result<()> {
    write_atomic(
        path,
        &render_for(path, &bench_title(rec), &bench_rows(rec))?,
    )
}

/// The `--plot` picture's title: the job and what the bars measure.
pub fn bench_title(rec: &BenchRecord) -> String {
    let c = &rec.config;
    format!(
        "{} n={} hidden={} — {} (log scale), median and min…max",
        c.data,
        c.n,
        c.model.hidden,
        match c.run.target_loss {
            Some(t) => format!("time to loss ≤ {t}"),
            None => format!("time per {} steps", c.steps),
        }
    )
}

/// The `--plot` picture's bars, one per row.
pub fn bench_rows(rec: &BenchRecord) -> Vec<Row<'_>> {
    rec.rows
        .iter()
        .map(|r| Row {
            name: &r.name,
            backend: &r.backend,
            median: r.summary.median,
            min: r.summary.min,
            max: r.summary.max,
            curve: &r.curve,
        })
        .collect()
}
