//! `ferrofit report`: one self-contained HTML page (inline SVG and CSS, no
//! script, no network) from `train` run records, `bench` records and `doctor
//! --json` output. Every string that came from a file is escaped.

use crate::backend::devices::DeviceInfo;
use crate::bench::export::BenchRecord;
use crate::bench::stats::fmt_time;
use crate::chart::axis::Unit;
use crate::chart::escape;
use crate::chart::inline as svg;
use crate::config::TrainConfig;
use crate::doctor::{DoctorRecord, Severity};
use crate::record::{RunRecord, Versions};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::path::Path;

/// What a JSON file holds, read typed.
pub enum Record {
    /// A `train --json` or `run.json` record.
    Train(Box<RunRecord>),
    /// A `bench --export-json` record.
    Bench(Box<BenchRecord>),
    /// A `doctor --json` record.
    Doctor(DoctorRecord),
}

/// Reads a parsed JSON record by its shape, or says what it expected. A file
/// of a known kind that does not fit its type is an error naming the field.
pub fn classify(v: Value, origin: &str) -> crate::Result<Record> {
    fn typed<T: DeserializeOwned>(v: Value, origin: &str, kind: &str) -> crate::Result<T> {
        serde_path_to_error::deserialize(v).map_err(|e| crate::FerroError::File {
            path: origin.into(),
            detail: format!(
                "a {kind} record whose field `{}` does not fit ({}); was it edited, or written by another version?",
                e.path(),
                e.inner()
            ),
        })
    }
    if v.get("loss_curve").is_some() && v.get("config").is_some() {
        Ok(Record::Train(Box::new(typed(v, origin, "run")?)))
    } else if v.get("rows").is_some() && v.get("config").is_some() {
        Ok(Record::Bench(Box::new(typed(v, origin, "bench")?)))
    } else if v.get("devices").is_some() && v.get("failed").is_some() {
        Ok(Record::Doctor(typed(v, origin, "doctor")?))
    } else {
        Err(crate::FerroError::File {
            path: origin.into(),
            detail: "not a ferrofit record: pass run.json from `train --out`, `bench --export-json` output or `doctor --json` output".into(),
        })
    }
}

const STYLE: &str = "
:root { color-scheme: light dark; --fg: #1a202c; --bg: #ffffff; --muted: #718096; --line: #e2e8f0; }
@media (prefers-color-scheme: dark) { :root { --fg: #e2e8f0; --bg: #171923; --muted: #a0aec0; --line: #2d3748; } }
body { font: 15px/1.5 system-ui, sans-serif; color: var(--fg); background: var(--bg); max-width: 980px; margin: 2em auto; padding: 0 1em; }
h1, h2, h3 { line-height: 1.2; } h2 { border-bottom: 1px solid var(--line); padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; width: 100%; font-size: 13px; margin: 1em 0; }
th, td { border-bottom: 1px solid var(--line); padding: .3em .5em; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.chart { width: 100%; height: auto; color: var(--fg); margin: .5em 0; }
.muted { color: var(--muted); } .pass { color: #38a169; } .warn { color: #d69e2e; } .fail { color: #e53e3e; font-weight: bold; }
code { font-size: 90%; }
@media print { :root { --fg: #000; --bg: #fff; --line: #ccc; } body { margin: 0; max-width: none; } h2 { break-after: avoid; } .chart { break-inside: avoid; } }
";

/// The whole page.
pub fn page(
    records: &[(String, Record)],
    model_dir: impl Fn(&str) -> Option<std::path::PathBuf>,
) -> String {
    let mut body = String::new();
    let mut machines = String::new();
    for (i, (origin, r)) in records.iter().enumerate() {
        match r {
            Record::Train(v) => {
                body += &train(i, origin, v, model_dir(origin).as_deref());
                machines += &device_rows(&v.backend, &v.device);
                machines += &versions(&v.versions);
            }
            Record::Bench(v) => {
                body += &bench(i, origin, v);
                for d in &v.adapters.devices {
                    machines += &device_rows(d.api.name(), d);
                }
                machines += &versions(&v.versions);
            }
            Record::Doctor(v) => {
                body += &doctor(origin, v);
                for d in &v.devices {
                    machines += &device_rows(&d.backend, &d.device);
                }
            }
        }
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>ferrofit report</title><style>{STYLE}</style></head><body>\
         <h1>ferrofit report</h1><p class=\"muted\">{} record(s): {}</p>{body}\
         <h2 id=\"machine\">Machine, drivers and versions</h2><table><tr><th>backend</th><th>device</th><th>kind</th><th>driver</th><th>memory</th><th>features</th></tr>{machines}</table>\
         </body></html>\n",
        records.len(),
        escape(&records.iter().map(|r| r.0.as_str()).collect::<Vec<_>>().join(", "))
    )
}

fn device_rows(backend: &str, d: &DeviceInfo) -> String {
    let mem = d
        .memory_bytes
        .map(|b| {
            format!(
                "{:.1} GiB ({})",
                b as f64 / (1u64 << 30) as f64,
                d.memory_note
            )
        })
        .unwrap_or_default();
    format!(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        escape(backend),
        escape(&d.name),
        escape(&format!("{:?}", d.class).to_lowercase()),
        escape(&d.driver),
        escape(&mem),
        escape(&d.features.join(", "))
    )
}

fn versions(v: &Versions) -> String {
    format!(
        "<tr><td colspan=\"6\" class=\"muted\">versions: {}</td></tr>",
        escape(&format!(
            "ferrofit {}, burn {}, cubecl {}",
            v.ferrofit, v.burn, v.cubecl
        ))
    )
}

fn job_line(c: &TrainConfig) -> String {
    let m = &c.model;
    escape(&format!(
        "{} · n = {} · hidden {}×{} {:?} · {:?} lr {} · {} steps · {:?}",
        c.data, c.n, m.hidden, m.layers, m.activation, c.optimizer, c.lr, c.steps, c.precision
    ))
}

fn train(i: usize, origin: &str, v: &RunRecord, model: Option<&Path>) -> String {
    let curve: Vec<(f64, f64)> = v
        .loss_curve
        .iter()
        .map(|p| (p.step as f64 + 1.0, p.loss))
        .collect();
    let label = format!("training · {} · {:?} engine", v.backend, v.engine);
    let val: Vec<(f64, f64)> = v
        .loss_curve
        .iter()
        .filter_map(|p| p.val_loss.map(|l| (p.step as f64 + 1.0, l)))
        .collect();
    let mut out = format!(
        "<h2 id=\"train-{i}\">Training run: {}</h2><p>{}</p><p class=\"muted\">{}</p>\
         <table><tr><th>final loss</th><th>validation loss</th><th>steps</th><th>time</th><th>steps/s</th><th>first step</th></tr>\
         <tr><td class=\"num\">{:.6}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{:.1}</td><td class=\"num\">{}</td></tr></table>",
        escape(origin),
        job_line(&v.config),
        escape(&format!(
            "{:?} engine{}",
            v.engine,
            v.engine_note
                .as_deref()
                .map(|n| format!(": {n}"))
                .unwrap_or_default()
        )),
        v.final_loss,
        v.validation_loss.map(|x| format!("{x:.6}")).unwrap_or("—".into()),
        v.steps,
        fmt_time(v.train_seconds),
        v.steps_per_second,
        fmt_time(v.first_step_seconds),
    );
    let mut series = vec![(label, curve)];
    let title = if val.is_empty() {
        "training loss by step (log–log)"
    } else {
        series.push(("validation (held-out rows)".to_string(), val));
        "training and validation loss by step (log–log)"
    };
    out += &svg::lines(
        &format!("loss-{i}"),
        title,
        &series,
        (true, true),
        (Unit::Plain, Unit::Plain),
        (
            "step",
            if v.normalization.is_some() {
                "loss (standardised units)"
            } else {
                "loss"
            },
        ),
    );
    if let Some(h) = &v.held_out {
        let pts: Vec<(f64, f64)> = h
            .actual
            .iter()
            .zip(&h.predicted)
            .map(|(&a, &p)| (a as f64, p as f64))
            .collect();
        let rows = if h.training_rows {
            "training rows (none held out)"
        } else {
            "held-out rows"
        };
        out += &svg::predicted_vs_actual(
            &format!("pred-{i}"),
            &format!(
                "predicted against actual {}, {} {rows}",
                h.target,
                pts.len()
            ),
            &pts,
            &h.target,
        );
        out += &svg::residuals(
            &format!("resid-{i}"),
            &format!("residuals of {}, {} {rows}", h.target, pts.len()),
            &pts,
            &h.target,
        );
    }
    if let Some(fitted) = model.and_then(|m| fit_chart(i, v, m)) {
        out += &fitted;
    }
    out
}

/// The fitted function against the task's data, for 1-D built-in tasks with a saved model.
fn fit_chart(i: usize, v: &RunRecord, model: &Path) -> Option<String> {
    let crate::config::Data::Task(task) = v.config.data else {
        return None;
    };
    let params = crate::save::load(&model.join("model.safetensors")).ok()?;
    if params.layers[0].fan_in != 1 {
        return None;
    }
    let act = v.config.model.activation;
    let seed = v.config.seed;
    let data = task.generate(400, seed);
    let pts: Vec<(f64, f64)> = data
        .x
        .iter()
        .zip(&data.y)
        .map(|(&x, &y)| (x as f64, y as f64))
        .collect();
    let xs: Vec<f32> = (0..=200).map(|k| -1.0 + 2.0 * k as f32 / 200.0).collect();
    let ys = crate::model::reference::predict(&params, act, &xs);
    let curve: Vec<(f64, f64)> = xs
        .iter()
        .zip(&ys)
        .map(|(&x, &y)| (x as f64, y as f64))
        .collect();
    Some(svg::fit(
        &format!("fit-{i}"),
        "the fitted function over 400 of the task's points",
        &pts,
        &curve,
    ))
}

fn bench(i: usize, origin: &str, v: &BenchRecord) -> String {
    let rows = &v.rows;
    let mut out = format!(
        "<h2 id=\"bench-{i}\">Bench: {}</h2><p>{} · {} timed runs each · baseline {}</p>",
        escape(origin),
        job_line(&v.config),
        v.reps,
        escape(&v.baseline)
    );
    let bars: Vec<(String, f64, f64, f64)> = rows
        .iter()
        .map(|r| {
            let sm = &r.summary;
            (
                format!("{} · {}", r.name, r.backend),
                sm.median,
                sm.min,
                sm.max,
            )
        })
        .collect();
    out += &svg::bars(&format!("bars-{i}"), "time per job by backend", &bars);
    out += "<table><tr><th>run</th><th>backend (device)</th><th>median</th><th>mean ± σ</th><th>min … max</th><th>step p50 / p99</th><th>step CV</th><th>loss</th><th>× baseline</th></tr>";
    for r in rows {
        let sm = &r.summary;
        let rel = r
            .relative
            .map(|(x, e)| format!("{x:.2} ± {e:.2}"))
            .unwrap_or("—".into());
        let (p50, cv) = match &r.step_latency {
            Some(l) => (
                format!("{} / {}", fmt_time(l.median), fmt_time(l.p99)),
                format!("{:.1}%", l.cv * 100.0),
            ),
            None => ("—".into(), "—".into()),
        };
        out += &format!(
            "<tr><td>{}</td><td>{} ({})</td><td class=\"num\">{}</td><td class=\"num\">{} ± {}</td><td class=\"num\">{} … {}</td><td class=\"num\">{p50}</td><td class=\"num\">{cv}</td><td class=\"num\">{:.5}</td><td class=\"num\">{rel}</td></tr>",
            escape(&r.name),
            escape(&r.backend),
            escape(&r.device),
            fmt_time(sm.median),
            fmt_time(sm.mean),
            fmt_time(sm.stddev),
            fmt_time(sm.min),
            fmt_time(sm.max),
            r.final_loss,
        );
    }
    out += "</table>";
    for k in &v.skipped {
        out += &format!(
            "<p class=\"muted\">skipped {} ({}): {}</p>",
            escape(&k.name),
            escape(&k.backend),
            escape(&k.reason)
        );
    }
    let series: Vec<(String, Vec<(f64, f64)>)> = rows
        .iter()
        .filter_map(|r| {
            let c: Vec<(f64, f64)> = r.curve.iter().map(|p| (p.seconds, p.loss)).collect();
            (c.len() > 1).then(|| (format!("{} · {}", r.name, r.backend), c))
        })
        .collect();
    if !series.is_empty() {
        out += &svg::lines(
            &format!("curves-{i}"),
            "loss against time, synced every step (log–log)",
            &series,
            (true, true),
            (Unit::Seconds, Unit::Plain),
            ("time", "training loss"),
        );
    }
    for (k, r) in rows.iter().enumerate() {
        let steps = &r.step_seconds;
        if steps.len() > 1 {
            out += &format!(
                "<h3>Per-step latency: {} · {}</h3>",
                escape(&r.name),
                escape(&r.backend)
            );
            out += &svg::histogram(
                &format!("hist-{i}-{k}"),
                "per-step latency histogram (jitter)",
                steps,
                30,
            );
        }
    }
    out
}

fn doctor(origin: &str, v: &DoctorRecord) -> String {
    let mut out = format!("<h2 id=\"doctor\">Doctor: {}</h2><table><tr><th>device</th><th>check</th><th>result</th><th>detail</th><th>fix</th></tr>", escape(origin));
    for d in &v.devices {
        for fd in &d.findings {
            let (class, sev) = match fd.severity {
                Severity::Pass => ("pass", "pass"),
                Severity::Warn => ("warn", "warn"),
                Severity::Fail => ("fail", "fail"),
            };
            out += &format!(
                "<tr><td>{}</td><td>{}</td><td class=\"{class}\">{sev}</td><td>{}</td><td>{}</td></tr>",
                escape(&format!("{} · {}", d.backend, d.device.name)),
                escape(&fd.check),
                escape(&fd.detail),
                escape(fd.fix.as_deref().unwrap_or_default())
            );
        }
    }
    out + "</table>"
}
