//! Data files as people download them, through the binary: text columns
//! beside numbers, missing cells, `predict` on a file that still holds the
//! target, and the report's pictures of such a run. The last test takes a
//! real public data set (Palmer penguins, as the `palmerpenguins` package
//! ships it; `.ci/fetch-penguins.sh`) and is reported skipped without it.

mod common;

use common::ferrofit;
use std::path::{Path, PathBuf};

/// Body mass from species (text), flipper length, and a sex column with `NA`
/// and empty cells; a text column nobody selects.
fn write_animals(dir: &Path) -> PathBuf {
    let mut text = String::from("name,species,flipper,sex,mass\n");
    for i in 0..300 {
        let species = ["gentoo", "adelie", "chinstrap"][i % 3];
        let flipper = 180.0 + (i * 7 % 40) as f64;
        let sex = match i % 10 {
            3 => "NA",
            7 => "",
            k if k % 2 == 0 => "male",
            _ => "female",
        };
        let base = [5000.0, 3700.0, 3730.0][i % 3];
        let mass = base + 20.0 * (flipper - 200.0) + if sex == "male" { 400.0 } else { 0.0 };
        text += &format!("bird {i},{species},{flipper},{sex},{mass}\n");
    }
    let p = dir.join("animals.csv");
    std::fs::write(&p, text).unwrap();
    p
}

fn train_args<'a>(csv: &'a str, out: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "train",
        "--backend",
        "cpu",
        "--csv",
        csv,
        "--target",
        "mass",
        "--optimizer",
        "adam",
        "--lr",
        "0.01",
        "--hidden",
        "32",
        "--steps",
        "400",
        "--json",
        "--out",
        out,
    ];
    v.extend(more);
    v
}

#[test]
fn text_columns_and_missing_cells_train_predict_and_report() {
    let dir = common::fresh_dir("datafiles");
    let csv = write_animals(&dir);
    let (c, out) = (csv.to_str().unwrap(), dir.join("run"));
    let o = out.to_str().unwrap();
    // Missing cells are refused by default, naming the row and the fix.
    let (code, _, e) = ferrofit(&train_args(c, o, &["--inputs", "species,flipper,sex"]));
    assert_eq!(code, 2, "{e}");
    assert!(
        e.contains("line 5") && e.contains("`sex` is missing") && e.contains("--missing drop"),
        "{e}"
    );
    let (code, stdout, e) = ferrofit(&train_args(
        c,
        o,
        &[
            "--inputs",
            "species,flipper,sex",
            "--missing",
            "drop",
            "--patience",
            "50",
        ],
    ));
    assert_eq!(code, 0, "{e}");
    assert!(e.contains("left out 60 of 300 rows"), "{e}");
    let rec: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(rec["dropped_rows"], 60);
    let enc = &rec["normalization"]["encodings"];
    assert_eq!(
        enc[0]["categories"],
        serde_json::json!(["adelie", "chinstrap", "gentoo"])
    );
    assert_eq!(enc[1], "number");
    assert!(rec["validation_loss"].as_f64().unwrap() < 0.05, "{stdout}");
    let curve = rec["loss_curve"].as_array().unwrap();
    assert!(
        curve.iter().all(|p| p["val_loss"].is_f64()),
        "a validation loss at every log point"
    );
    let held = &rec["held_out"];
    assert_eq!(held["target"], "mass");
    assert_eq!(held["actual"].as_array().unwrap().len(), 24);
    // predict keeps every column and adds the prediction beside the target.
    let pred = dir.join("pred.csv");
    let (code, _, e) = ferrofit(&[
        "predict",
        "--model",
        o,
        "--csv",
        c,
        "--missing",
        "drop",
        "--out",
        pred.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{e}");
    assert!(e.contains("60 rows have a missing input"), "{e}");
    let rmse: f64 = e
        .split("against `mass` (240 rows): RMSE ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no error against the target in: {e}"));
    assert!(rmse < 150.0, "{e}");
    let text = std::fs::read_to_string(&pred).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "name,species,flipper,sex,mass,predicted_mass");
    assert_eq!(lines.len(), 301);
    assert!(
        lines[1].starts_with("bird 0,gentoo,180,male,5000,"),
        "{}",
        lines[1]
    );
    assert_eq!(
        lines[4], "bird 3,gentoo,201,NA,5020,",
        "a row left out keeps its cells"
    );
    // A category the model never saw is an error, not a guess.
    let odd = dir.join("odd.csv");
    std::fs::write(&odd, "species,flipper,sex\nemperor,200,male\n").unwrap();
    let (code, _, e) = ferrofit(&["predict", "--model", o, "--csv", odd.to_str().unwrap()]);
    assert_eq!(code, 2, "{e}");
    assert!(
        e.contains("`emperor` is a category the model was not trained on"),
        "{e}"
    );
    // The report shows both curves and the predicted-vs-actual pictures.
    let page = dir.join("report.html");
    let run_json = out.join("run.json");
    let (code, _, e) = ferrofit(&[
        "report",
        run_json.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{e}");
    let html = std::fs::read_to_string(&page).unwrap();
    for id in ["loss-0", "pred-0", "resid-0"] {
        assert!(html.contains(&format!("id=\"{id}\"")), "no #{id}");
    }
    assert!(html.contains("validation (held-out rows)"));
    assert_round_ticks(&html, "pred-0");
}

/// Every tick label of chart `id` is a number, and they step evenly by 1, 2
/// or 5 × 10ᵏ.
fn assert_round_ticks(html: &str, id: &str) {
    let chart = html.split(&format!("id=\"{id}\"")).nth(1).unwrap();
    let chart = chart.split("</svg>").next().unwrap();
    let labels: Vec<f64> = chart
        .split("text-anchor=\"end\" fill=\"currentColor\">")
        .skip(1)
        .filter_map(|s| s.split('<').next())
        .map(|s| {
            s.parse::<f64>()
                .unwrap_or_else(|_| panic!("tick `{s}` in #{id}"))
        })
        .collect();
    assert!(labels.len() >= 3, "{labels:?}");
    let step = (labels[0] - labels[1]).abs();
    let mantissa = step / 10f64.powf(step.log10().floor());
    assert!(
        [1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-9),
        "ticks of #{id} step by {step}: {labels:?}"
    );
    for w in labels.windows(2) {
        assert!(
            ((w[0] - w[1]).abs() - step).abs() < step * 1e-9,
            "{labels:?}"
        );
    }
}

/// A real public data set, as downloaded: text columns, `NA` cells.
#[test]
fn the_palmer_penguins_train_predict_and_report() {
    let Ok(csv) = std::env::var("FERROFIT_PENGUINS") else {
        common::skip(
            "the_palmer_penguins_train_predict_and_report",
            "FERROFIT_PENGUINS is not set (.ci/test.sh fetches the data set)",
        );
        return;
    };
    let dir = common::fresh_dir("penguins");
    let out = dir.join("run");
    let (code, stdout, e) = ferrofit(&[
        "train",
        "--backend",
        "cpu",
        "--csv",
        &csv,
        "--inputs",
        "species,island,bill_length_mm,bill_depth_mm,flipper_length_mm,sex",
        "--target",
        "body_mass_g",
        "--missing",
        "drop",
        "--val-split",
        "0.2",
        "--hidden",
        "32",
        "--optimizer",
        "adam",
        "--lr",
        "0.01",
        "--steps",
        "300",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{e}");
    let rec: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    // 344 penguins; 11 have no recorded sex (2 of them no measurements either).
    assert_eq!(rec["dropped_rows"], 11, "{e}");
    let names = rec["normalization"]["encodings"][0]["categories"].clone();
    assert_eq!(names, serde_json::json!(["Adelie", "Chinstrap", "Gentoo"]));
    // Body mass from these is a known easy fit (R² ≈ 0.87 by linear regression).
    let val = rec["validation_loss"].as_f64().unwrap();
    assert!(val < 0.3, "validation loss {val} (standardised)");
    let pred = dir.join("pred.json");
    let (code, _, e) = ferrofit(&[
        "predict",
        "--model",
        out.to_str().unwrap(),
        "--csv",
        &csv,
        "--missing",
        "drop",
        "--out",
        pred.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{e}");
    assert!(e.contains("against `body_mass_g` (333 rows)"), "{e}");
    let rows: serde_json::Value = serde_json::from_slice(&std::fs::read(&pred).unwrap()).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 344);
    assert_eq!(rows[0]["species"], "Adelie");
    assert!(rows[0]["predicted_body_mass_g"].as_f64().unwrap() > 2500.0);
    assert!(
        rows[3]["predicted_body_mass_g"].is_null(),
        "the all-NA row has no prediction"
    );
    let page = dir.join("report.html");
    let (code, _, e) = ferrofit(&[
        "report",
        out.join("run.json").to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{e}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert_round_ticks(&html, "pred-0");
    assert_round_ticks(&html, "resid-0");
}
