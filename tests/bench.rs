//! `ferrofit bench`: exports (exact text for a fixed record), the history
//! database under concurrency and a kill mid-write, and the CLI end to end.

mod common;

use ferrofit::backend::devices::Inventory;
use ferrofit::bench::export::{csv, markdown, BenchRecord};
use ferrofit::bench::history::{compare_lines, History};
use ferrofit::bench::stats::Summary;
use ferrofit::bench::{set_relative, BenchRow};
use ferrofit::chart::picture as plot;
use ferrofit::config::TrainConfig;
use std::process::Command;

fn row(name: &str, backend: &str, samples: &[f64]) -> BenchRow {
    BenchRow {
        name: name.into(),
        backend: backend.into(),
        device: "Test Device".into(),
        samples: samples.to_vec(),
        summary: Summary::of(samples),
        step_latency: None,
        first_step_seconds: None,
        final_loss: 0.015,
        throughput: 1.0,
        reached_target: false,
        steps: 10,
        curve: vec![],
        step_seconds: vec![],
        relative: None,
        note: None,
        warnings: Vec::new(),
    }
}

fn record() -> BenchRecord {
    let cfg = TrainConfig {
        n: 1000,
        steps: 10,
        ..TrainConfig::default()
    };
    let mut rec = BenchRecord::new(cfg, 3, "cpu".into(), Inventory::default());
    rec.rows = vec![
        row("ferrofit fused", "cpu", &[0.002, 0.003, 0.004]),
        row("jax jit", "cpu", &[0.006, 0.006, 0.006]),
    ];
    set_relative(&mut rec.rows, "cpu");
    rec
}

#[test]
fn markdown_and_csv_are_exact() {
    let rec = record();
    let md = markdown(&rec);
    let expected_rows = "| ferrofit fused | cpu (Test Device) | 3.00 ms | 3.00 ms ± 1.00 ms | 2.00 ms … 4.00 ms | — | — | 0.01500 | 1.00 ± 0.47 |\n\
                         | jax jit | cpu (Test Device) | 6.00 ms | 6.00 ms ± 0.0 µs | 6.00 ms … 6.00 ms | — | — | 0.01500 | 0.50 ± 0.17 |\n";
    assert!(md.contains(expected_rows), "{md}");
    assert!(
        md.starts_with(
            "Job: x2-noise n=1000 hidden=10x1 Sgd lr 0.2 steps 10 precision F32; 3 timed runs"
        ),
        "{md}"
    );
    let c = csv(&rec);
    assert_eq!(c.lines().count(), 3);
    let f: Vec<&str> = c.lines().nth(2).unwrap().split(',').collect();
    assert_eq!(
        &f[..5],
        ["jax jit", "cpu", "Test Device", "3", "0.006"],
        "{c}"
    );
    let relative: f64 = f[14].parse().unwrap();
    assert!((relative - 0.5).abs() < 1e-12, "{c}");
}

#[test]
fn plot_escapes_hostile_names() {
    let mut rec = record();
    rec.rows[0].name = "<script>alert(1)</script>".into();
    let s = plot::svg(&plot::bench_title(&rec), &plot::bench_rows(&rec));
    assert!(!s.contains("<script>") && s.contains("&lt;script&gt;"));
    assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
}

#[test]
fn plot_draws_loss_curves_and_a_png() {
    use ferrofit::engine::run::LossPoint;
    let mut rec = record();
    rec.rows[0].curve = (0..10)
        .map(|i| LossPoint {
            val_loss: None,
            step: i,
            loss: 1.0 / (i + 1) as f64,
            seconds: 1e-3 * (i + 1) as f64,
        })
        .collect();
    let s = plot::svg(&plot::bench_title(&rec), &plot::bench_rows(&rec));
    assert_eq!(s.matches("<polyline").count(), 1, "{s}");
    let png = plot::png(&plot::bench_title(&rec), &plot::bench_rows(&rec)).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    // Width and height from the IHDR chunk match the SVG's.
    let w = u32::from_be_bytes(png[16..20].try_into().unwrap());
    assert!(s.contains(&format!("width=\"{w}\"")), "png width {w}");
    let dir = std::env::temp_dir().join(format!("ferrofit-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bench.png");
    plot::write_bench(&path, &rec).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), png);
}

#[test]
fn target_runs_get_a_steps_column_and_misses_are_starred() {
    let mut rec = record();
    rec.config.run.target_loss = Some(0.01);
    rec.rows[0].reached_target = true;
    rec.rows[0].steps = 7;
    let md = markdown(&rec);
    assert!(md.contains("| steps to target |"), "{md}");
    assert!(md.contains("| 1.00 ± 0.47 | 7 |"), "{md}");
    rec.rows[0].reached_target = false;
    let md = markdown(&rec);
    assert!(
        md.contains("| ferrofit fused * |") && md.contains("| > 7 |"),
        "{md}"
    );
}

fn temp_db(tag: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("ferrofit-hist-{tag}-{}.sqlite", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

#[test]
fn history_survives_concurrent_benches_and_compares_with_the_last() {
    let path = temp_db("conc");
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut h = History::open(&path).unwrap();
                for _ in 0..20 {
                    h.append(&record()).unwrap();
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let h = History::open(&path).unwrap();
    assert_eq!(h.len().unwrap(), 80);
    let mut newer = record();
    newer.rows[0] = row("ferrofit fused", "cpu", &[0.0015, 0.0015, 0.0015]);
    let prev = h.previous(&newer).unwrap();
    assert_eq!(prev[0].as_ref().unwrap().median, 0.003);
    let lines = compare_lines(&newer, &prev);
    assert!(
        lines[0].contains("-50.0%") && lines[0].contains("faster"),
        "{}",
        lines[0]
    );
}

/// Child mode for the kill test: append forever.
#[test]
fn child_writer_loop() {
    let Ok(path) = std::env::var("FERROFIT_HISTORY_CHILD") else {
        return;
    };
    let mut h = History::open(std::path::Path::new(&path)).unwrap();
    loop {
        h.append(&record()).unwrap();
    }
}

#[test]
fn history_survives_a_kill_mid_write() {
    let path = temp_db("kill");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_writer_loop", "--nocapture"])
        .env("FERROFIT_HISTORY_CHILD", &path)
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let h = History::open(&path).unwrap();
    let n = h.len().unwrap();
    assert!(n > 0, "the child wrote nothing");
    assert_eq!(
        n % 2,
        0,
        "a bench's rows are written together or not at all"
    );
}

#[test]
fn bench_cli_writes_json_and_compares_with_the_previous_run() {
    let dir = std::env::temp_dir().join(format!("ferrofit-bench-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (db, json) = (dir.join("h.sqlite"), dir.join("b.json"));
    // Every backend the suite covers (lavapipe's Vulkan in CI).
    let backends: Vec<String> = common::targets().iter().map(|t| t.label()).collect();
    let backends = backends.join(",");
    let args = [
        "bench",
        "--backends",
        &backends,
        "--n",
        "2000",
        "--steps",
        "5",
        "--reps",
        "2",
        "--compare",
        "last",
    ];
    let files = [
        "--db",
        db.to_str().unwrap(),
        "--export-json",
        json.to_str().unwrap(),
    ];
    let bin = env!("CARGO_BIN_EXE_ferrofit");
    let first = Command::new(bin).args(args).args(files).output().unwrap();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(String::from_utf8_lossy(&first.stdout).contains("no earlier run"));
    let second = Command::new(bin).args(args).args(files).output().unwrap();
    let out = String::from_utf8_lossy(&second.stdout);
    assert!(
        out.contains("| ferrofit fused | cpu") && out.contains(" since "),
        "{out}"
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(
        rows.len(),
        backends.split(',').count(),
        "one row per backend: {out}"
    );
    for r in rows {
        for key in [
            "samples",
            "summary",
            "step_latency",
            "first_step_seconds",
            "final_loss",
            "throughput",
            "relative",
        ] {
            assert!(!r[key].is_null(), "missing {key} in {r}");
        }
        assert_eq!(r["samples"].as_array().unwrap().len(), 2);
    }
    assert!(v["adapters"]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["api"] == "cpu"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bench_with_a_target_loss_reports_time_to_target() {
    let args = [
        "bench",
        "--backends",
        "cpu",
        "--n",
        "2000",
        "--steps",
        "3",
        "--reps",
        "1",
        "--target-loss",
        "1e-9",
        "--no-history",
    ];
    let out = Command::new(env!("CARGO_BIN_EXE_ferrofit"))
        .args(args)
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&out.stdout);
    // A missed target is a result (starred), not a failure of the command.
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        t.contains("time to loss <= 0.000000001") && t.contains("| ferrofit fused * |"),
        "{t}"
    );
}

#[test]
fn bench_devices_adds_a_data_parallel_row_that_reaches_the_same_loss() {
    let dir = std::env::temp_dir().join(format!("ferrofit-bench-dp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("b.json");
    // Two replicas on the one CPU device: the same split and all-reduce as two GPUs.
    let out = Command::new(env!("CARGO_BIN_EXE_ferrofit"))
        .args([
            "bench",
            "--backends",
            "cpu",
            "--devices",
            "0,0",
            "--n",
            "3001",
        ])
        .args([
            "--steps",
            "6",
            "--reps",
            "1",
            "--no-history",
            "--export-json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(t.contains("| ferrofit fused x2 | cpu (2x "), "{t}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{t}");
    let loss = |i: usize| rows[i]["final_loss"].as_f64().unwrap();
    assert!(
        (loss(0) - loss(1)).abs() <= 1e-5 * loss(0),
        "one device {} vs two replicas {}",
        loss(0),
        loss(1)
    );
    assert!(rows[1]["note"].as_str().unwrap().contains("cpu #0, cpu #0"));
    std::fs::remove_dir_all(dir).unwrap();
}
