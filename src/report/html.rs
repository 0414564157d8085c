//! `ferrofit report`: one self-contained HTML page (inline SVG and CSS, no
//! script, no network) from `train` run records, `bench` records and `doctor
//! --json` output. Every string that came from a file is escaped.

use super::svg;
use crate::bench::plot::escape;
use crate::bench::stats::fmt_time;
use serde_json::Value;
use std::path::Path;

/// What kind of record a JSON file holds.
pub enum Record {
    Train(Value),
    Bench(Value),
    Doctor(Value),
}

/// Classifies a parsed JSON record, or says what it expected.
pub fn classify(v: Value, origin: &str) -> crate::Result<Record> {
    if v.get("loss_curve").is_some() && v.get("config").is_some() {
        Ok(Record::Train(v))
    } else if v.get("rows").is_some() && v.get("config").is_some() {
        Ok(Record::Bench(v))
    } else if v
        .get("devices")
        .and_then(|d| d.get(0))
        .and_then(|d| d.get("findings"))
        .is_some()
    {
        Ok(Record::Doctor(v))
    } else {
        Err(crate::FerroError::File {
            path: origin.into(),
            detail: "not a ferrofit record: pass run.json from `train --out`, `bench --json` output or `doctor --json` output".into(),
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

fn s(v: &Value) -> String {
    match v {
        Value::String(t) => t.clone(),
        Value::Null => "—".into(),
        other => other.to_string(),
    }
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

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
                machines += &device_rows(&v["backend"], &v["device"]);
                machines += &versions(&v["versions"]);
            }
            Record::Bench(v) => {
                body += &bench(i, origin, v);
                for d in v["adapters"]["devices"].as_array().into_iter().flatten() {
                    machines += &device_rows(&d["api"], d);
                }
                machines += &versions(&v["versions"]);
            }
            Record::Doctor(v) => {
                body += &doctor(origin, v);
                for d in v["devices"].as_array().into_iter().flatten() {
                    machines += &device_rows(&d["backend"], &d["device"]);
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

fn device_rows(backend: &Value, d: &Value) -> String {
    let mem = d["memory_bytes"]
        .as_f64()
        .map(|b| {
            format!(
                "{:.1} GiB ({})",
                b / (1u64 << 30) as f64,
                s(&d["memory_note"])
            )
        })
        .unwrap_or_default();
    let feats: Vec<String> = d["features"]
        .as_array()
        .into_iter()
        .flatten()
        .map(s)
        .collect();
    format!(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        escape(&s(backend)),
        escape(&s(&d["name"])),
        escape(&s(&d["class"])),
        escape(&s(&d["driver"])),
        escape(&mem),
        escape(&feats.join(", "))
    )
}

fn versions(v: &Value) -> String {
    let items: Vec<String> = v
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, x)| format!("{k} {}", s(x)))
        .collect();
    format!(
        "<tr><td colspan=\"6\" class=\"muted\">versions: {}</td></tr>",
        escape(&items.join(", "))
    )
}

fn job_line(c: &Value) -> String {
    escape(&format!(
        "{} · n = {} · hidden {}×{} {} · {} lr {} · {} steps · {}",
        s(&c["task"]),
        s(&c["n"]),
        s(&c["model"]["hidden"]),
        s(&c["model"]["layers"]),
        s(&c["model"]["activation"]),
        s(&c["optimizer"]),
        s(&c["lr"]),
        s(&c["steps"]),
        s(&c["precision"])
    ))
}

fn train(i: usize, origin: &str, v: &Value, model: Option<&Path>) -> String {
    let curve: Vec<(f64, f64)> = v["loss_curve"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| (f(&p["step"]) + 1.0, f(&p["loss"])))
        .collect();
    let label = format!("{} · {} engine", s(&v["backend"]), s(&v["engine"]));
    let mut out = format!(
        "<h2 id=\"train-{i}\">Training run: {}</h2><p>{}</p>\
         <table><tr><th>final loss</th><th>validation loss</th><th>steps</th><th>time</th><th>steps/s</th><th>first step</th></tr>\
         <tr><td class=\"num\">{:.6}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{:.1}</td><td class=\"num\">{}</td></tr></table>",
        escape(origin),
        job_line(&v["config"]),
        f(&v["final_loss"]),
        v["validation_loss"].as_f64().map(|x| format!("{x:.6}")).unwrap_or("—".into()),
        s(&v["steps"]),
        fmt_time(f(&v["train_seconds"])),
        f(&v["steps_per_second"]),
        fmt_time(f(&v["first_step_seconds"])),
    );
    out += &svg::lines(
        &format!("loss-{i}"),
        "training loss by step (log–log)",
        &[(label, curve)],
        (true, true),
        "step",
    );
    if let Some(fitted) = model.and_then(|m| fit_chart(i, v, m)) {
        out += &fitted;
    }
    out
}

/// The fitted function against the task's data, for 1-D built-in tasks with a saved model.
fn fit_chart(i: usize, v: &Value, model: &Path) -> Option<String> {
    let task = crate::task::Task::parse(v["config"]["task"].as_str()?).ok()?;
    let params = crate::save::load(&model.join("model.safetensors")).ok()?;
    if params.layers[0].fan_in != 1 {
        return None;
    }
    let act: crate::config::Activation =
        serde_json::from_value(v["config"]["model"]["activation"].clone()).ok()?;
    let seed = v["config"]["seed"].as_u64().unwrap_or(42);
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

fn bench(i: usize, origin: &str, v: &Value) -> String {
    let rows = v["rows"].as_array().cloned().unwrap_or_default();
    let mut out = format!(
        "<h2 id=\"bench-{i}\">Bench: {}</h2><p>{} · {} timed runs each · baseline {}</p>",
        escape(origin),
        job_line(&v["config"]),
        s(&v["reps"]),
        escape(&s(&v["baseline"]))
    );
    let bars: Vec<(String, f64, f64, f64)> = rows
        .iter()
        .map(|r| {
            (
                format!("{} · {}", s(&r["name"]), s(&r["backend"])),
                f(&r["summary"]["median"]),
                f(&r["summary"]["min"]),
                f(&r["summary"]["max"]),
            )
        })
        .collect();
    out += &svg::bars(&format!("bars-{i}"), "time per job by backend", &bars);
    out += "<table><tr><th>run</th><th>backend (device)</th><th>median</th><th>mean ± σ</th><th>min … max</th><th>step p50 / p99</th><th>step CV</th><th>loss</th><th>× baseline</th></tr>";
    for r in &rows {
        let sm = &r["summary"];
        let lat = &r["step_latency"];
        let rel = r["relative"]
            .as_array()
            .map(|a| format!("{:.2} ± {:.2}", f(&a[0]), f(&a[1])))
            .unwrap_or("—".into());
        out += &format!(
            "<tr><td>{}</td><td>{} ({})</td><td class=\"num\">{}</td><td class=\"num\">{} ± {}</td><td class=\"num\">{} … {}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{:.5}</td><td class=\"num\">{rel}</td></tr>",
            escape(&s(&r["name"])),
            escape(&s(&r["backend"])),
            escape(&s(&r["device"])),
            fmt_time(f(&sm["median"])),
            fmt_time(f(&sm["mean"])),
            fmt_time(f(&sm["stddev"])),
            fmt_time(f(&sm["min"])),
            fmt_time(f(&sm["max"])),
            if lat.is_null() { "—".into() } else { format!("{} / {}", fmt_time(f(&lat["median"])), fmt_time(f(&lat["p99"]))) },
            if lat.is_null() { "—".into() } else { format!("{:.1}%", f(&lat["cv"]) * 100.0) },
            f(&r["final_loss"]),
        );
    }
    out += "</table>";
    for s_ in v["skipped"].as_array().into_iter().flatten() {
        out += &format!(
            "<p class=\"muted\">skipped {} ({}): {}</p>",
            escape(&s(&s_["name"])),
            escape(&s(&s_["backend"])),
            escape(&s(&s_["reason"]))
        );
    }
    let series: Vec<(String, Vec<(f64, f64)>)> = rows
        .iter()
        .filter_map(|r| {
            let c: Vec<(f64, f64)> = r["curve"]
                .as_array()?
                .iter()
                .map(|p| (f(&p["seconds"]), f(&p["loss"])))
                .collect();
            (c.len() > 1).then(|| (format!("{} · {}", s(&r["name"]), s(&r["backend"])), c))
        })
        .collect();
    if !series.is_empty() {
        out += &svg::lines(
            &format!("curves-{i}"),
            "loss against time, synced every step (log–log)",
            &series,
            (true, true),
            "seconds",
        );
    }
    for (k, r) in rows.iter().enumerate() {
        let steps: Vec<f64> = r["step_seconds"]
            .as_array()
            .into_iter()
            .flatten()
            .map(f)
            .collect();
        if steps.len() > 1 {
            out += &format!(
                "<h3>Per-step latency: {} · {}</h3>",
                escape(&s(&r["name"])),
                escape(&s(&r["backend"]))
            );
            out += &svg::histogram(
                &format!("hist-{i}-{k}"),
                "per-step latency histogram (jitter)",
                &steps,
                30,
            );
        }
    }
    out
}

fn doctor(origin: &str, v: &Value) -> String {
    let mut out = format!("<h2 id=\"doctor\">Doctor: {}</h2><table><tr><th>device</th><th>check</th><th>result</th><th>detail</th><th>fix</th></tr>", escape(origin));
    for d in v["devices"].as_array().into_iter().flatten() {
        for fd in d["findings"].as_array().into_iter().flatten() {
            let sev = s(&fd["severity"]);
            let class = match sev.as_str() {
                "pass" => "pass",
                "warn" => "warn",
                _ => "fail",
            };
            out += &format!(
                "<tr><td>{}</td><td>{}</td><td class=\"{class}\">{}</td><td>{}</td><td>{}</td></tr>",
                escape(&format!("{} · {}", s(&d["backend"]), s(&d["device"]["name"]))),
                escape(&s(&fd["check"])),
                escape(&sev),
                escape(&s(&fd["detail"])),
                escape(&fd["fix"].as_str().map(String::from).unwrap_or_default())
            );
        }
    }
    out + "</table>"
}
