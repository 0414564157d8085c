//! Robust runs through the binary: CSV data and its errors, predict, and a
//! job too large for the device (run folders and checkpoints: `runs.rs`).
//! Each error class is checked for its message and exit code.

mod common;

use common::ferrofit;
use std::path::{Path, PathBuf};

/// y = 2a - b + 0.5 on a grid, as CSV with a header.
fn write_csv(dir: &Path) -> PathBuf {
    let mut text = String::from("a,b,y\n");
    for i in 0..400 {
        let (a, b) = ((i % 20) as f64 / 10.0, (i / 20) as f64 / 10.0);
        text += &format!("{a},{b},{}\n", 2.0 * a - b + 0.5);
    }
    let p = dir.join("data.csv");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn csv_trains_saves_normalisation_and_predicts_in_file_units() {
    let dir = common::fresh_dir("robust-csv");
    let csv = write_csv(&dir);
    let out = dir.join("run");
    let (code, stdout, stderr) = ferrofit(&[
        "train",
        "--backend",
        "cpu",
        "--csv",
        csv.to_str().unwrap(),
        "--inputs",
        "a,b",
        "--target",
        "y",
        "--optimizer",
        "adam",
        "--lr",
        "0.02",
        "--steps",
        "400",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert!(v["validation_loss"].as_f64().unwrap() < 0.01, "{stdout}");
    assert_eq!(v["normalization"]["inputs"], serde_json::json!(["a", "b"]));
    let (code, stdout, stderr) = ferrofit(&[
        "predict",
        "--model",
        out.to_str().unwrap(),
        "--x",
        "1.0,0.5",
        "--x",
        "0.2,1.5",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "a,b,predicted_y");
    for (line, want) in lines[1..].iter().zip([2.0, -0.6]) {
        let got: f64 = line.rsplit(',').next().unwrap().parse().unwrap();
        assert!((got - want).abs() < 0.1, "{line} vs {want}");
    }
    // predict on the CSV, into `target`.
    let predict_into = |target: &Path| {
        ferrofit(&[
            "predict",
            "--model",
            out.to_str().unwrap(),
            "--csv",
            csv.to_str().unwrap(),
            "--out",
            target.to_str().unwrap(),
        ])
    };
    let pred = dir.join("p.json");
    let (code, _, stderr) = predict_into(&pred);
    assert_eq!(code, 0, "{stderr}");
    let rows: serde_json::Value = serde_json::from_slice(&std::fs::read(&pred).unwrap()).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 400);
    // --out naming an input (the data, the model) is refused; the input is kept.
    let data_before = std::fs::read(&csv).unwrap();
    let model = out.join("model.safetensors");
    for target in [&csv, &model] {
        let before = std::fs::read(target).unwrap();
        let (code, _, stderr) = predict_into(target);
        assert_eq!(code, 2, "{stderr}");
        assert!(stderr.contains("--out"), "{stderr}");
        assert_eq!(
            std::fs::read(target).unwrap(),
            before,
            "{} was overwritten",
            target.display()
        );
    }
    assert_eq!(std::fs::read(&csv).unwrap(), data_before);
}

#[test]
fn malformed_csv_and_predict_inputs_get_file_line_column_and_fix() {
    let dir = common::fresh_dir("robust-bad");
    let cases: [(&str, &str, &str); 6] = [
        ("", "a", "no rows"),
        (
            "a,b\n1,2\n3,x\n",
            "a",
            "line 3: column `b`: `x` is not a number",
        ),
        (
            "a,b\n1,2\n3,inf\n",
            "a",
            "line 3: column `b`: `inf` is not finite",
        ),
        (
            "a,b\n1,2\n3,4,5\n",
            "a",
            "line 3: 3 fields where the first line has 2",
        ),
        (
            "a,b\n1,2\n",
            "c",
            "has no such column; its 2 columns are a, b",
        ),
        (
            "a;b\n1;2\n",
            "a",
            "line 2: 1 fields where the first line has 2",
        ),
    ];
    for (i, (text, inputs, want)) in cases.iter().enumerate() {
        let p = dir.join(format!("{i}.csv"));
        std::fs::write(&p, text).unwrap();
        // Case 5 forces the wrong delimiter: the header splits on `,` into... one field,
        // so the hint names --delimiter.
        let mut args = vec![
            "train",
            "--csv",
            p.to_str().unwrap(),
            "--inputs",
            inputs,
            "--target",
            "b",
        ];
        if i == 5 {
            args = vec![
                "train",
                "--csv",
                p.to_str().unwrap(),
                "--inputs",
                "0",
                "--target",
                "1",
                "--delimiter",
                ",",
            ];
            std::fs::write(&p, "a,b\n1;2\n").unwrap();
        }
        let (code, _, stderr) = ferrofit(&args);
        assert_eq!(code, 2, "case {i}: {stderr}");
        assert!(stderr.contains(want), "case {i}: {stderr}");
        assert!(!stderr.contains("panicked"), "case {i}: {stderr}");
    }
    let (code, _, stderr) = ferrofit(&["predict", "--model", dir.to_str().unwrap(), "--x", "1"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("model.safetensors"), "{stderr}");
}

/// A job larger than the device takes (lavapipe binds at most 128 MiB of a
/// buffer: 2^25 points) is refused before any upload, the largest N that
/// fits named; no failed step, no probe.
#[test]
fn a_job_too_large_for_the_device_names_the_largest_size_that_fits() {
    let name = "robust::a_job_too_large_for_the_device_names_the_largest_size_that_fits";
    let Some(t) = common::device(common::Kind::Wgpu, name) else {
        return;
    };
    let Some(max) = t.info.binding_bytes.filter(|&b| b < 160_000_000) else {
        common::skip(name, "this wgpu device binds 4e7 points' data (160 MB)");
        return;
    };
    let (code, _, stderr) = ferrofit(&["train", "--backend", "wgpu", "--n", "40000000"]);
    assert_eq!(code, 2, "{stderr}");
    let n: usize = stderr
        .split("use --n ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no largest N in: {stderr}"));
    assert_eq!(n as u64, max / 4, "{stderr}");
    assert!(stderr.contains(&format!("--n {n} or less")), "{stderr}");
    assert!(!stderr.contains("probing"), "{stderr}");
}
