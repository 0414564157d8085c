//! `ferrofit predict --model DIR (--csv FILE | --x VALUES)`: runs a saved
//! model on new inputs, in the data's own units (the standardisation saved
//! with a `--csv` model is applied both ways), and writes CSV or JSON.

use crate::error::FerroError;
use crate::io::write_atomic;
use crate::model::reference;
use crate::userdata::Normalization;
use clap::Args;
use std::path::{Path, PathBuf};

/// Arguments of `predict`.
#[derive(Args, Debug)]
pub struct PredictArgs {
    /// A folder written by `train --out`, or its model.safetensors.
    #[arg(long)]
    model: PathBuf,
    /// Inputs from a CSV file (columns: the names the model was trained on, else --inputs).
    #[arg(long, conflicts_with = "x")]
    csv: Option<PathBuf>,
    /// Input columns of --csv (names or 0-based indices), when they differ from training.
    #[arg(long)]
    inputs: Option<String>,
    /// Input values: `0.1,0.5,0.9` (one point each for a 1-input model; else
    /// points of `inputs` values, row after row). Repeatable.
    #[arg(long, allow_hyphen_values = true)]
    x: Vec<String>,
    /// Write here (.csv or .json) instead of CSV on stdout.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Runs `predict`.
pub fn run(a: PredictArgs) -> anyhow::Result<()> {
    let file = if a.model.is_dir() {
        a.model.join("model.safetensors")
    } else {
        a.model.clone()
    };
    // Never write over a file this command reads.
    if let Some(out) = &a.out {
        for input in [Some(file.as_path()), a.csv.as_deref()]
            .into_iter()
            .flatten()
        {
            if same_file(out, input) {
                anyhow::bail!(crate::FerroError::arg(
                    "out",
                    out.display(),
                    format!(
                        "that is {}, which predict reads: write the predictions to another file",
                        input.display()
                    )
                ));
            }
        }
    }
    let crate::save::SavedModel {
        params,
        activation: act,
        normalization: norm,
    } = crate::save::load_model(&file)?;
    let fan_in = params.layers[0].fan_in;
    let fan_out = params.layers[params.layers.len() - 1].fan_out;
    let mut x = match (&a.csv, a.x.is_empty()) {
        (Some(path), _) => csv_inputs(path, a.inputs.as_deref(), norm.as_ref(), fan_in)?,
        (None, false) => flag_inputs(&a.x, fan_in)?,
        (None, true) => anyhow::bail!(FerroError::arg(
            "x",
            "(none)",
            "give inputs: --x 0.1,0.5 or --csv FILE"
        )),
    };
    let raw = x.clone();
    if let Some(n) = &norm {
        n.inputs_to_model(&mut x);
    }
    let mut y = reference::predict(&params, act, &x);
    if let Some(n) = &norm {
        n.outputs_to_file(&mut y);
    }
    let names = |given: Option<&Vec<String>>, prefix: &str, k: usize| -> Vec<String> {
        given
            .cloned()
            .unwrap_or_else(|| (0..k).map(|i| format!("{prefix}{i}")).collect())
    };
    let in_names = names(norm.as_ref().map(|n| &n.inputs), "x", fan_in);
    let out_names = names(norm.as_ref().map(|n| &n.targets), "y", fan_out);
    let text = match a.out.as_deref().and_then(Path::extension) {
        Some(e) if e == "json" => json(&raw, &y, fan_in, fan_out, &in_names, &out_names),
        _ => csv(&raw, &y, fan_in, fan_out, &in_names, &out_names),
    };
    match &a.out {
        Some(p) => write_atomic(p, text.as_bytes())?,
        None => print!("{text}"),
    }
    Ok(())
}

/// Whether `a` and `b` name one existing file.
fn same_file(a: &Path, b: &Path) -> bool {
    matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

fn csv_inputs(
    path: &Path,
    inputs: Option<&str>,
    norm: Option<&Normalization>,
    fan_in: usize,
) -> anyhow::Result<Vec<f32>> {
    let table = crate::csv::read(path, None)?;
    let origin = path.display().to_string();
    let spec = match (inputs, norm, &table.header) {
        (Some(s), _, _) => s.to_string(),
        (None, Some(n), Some(_)) => n.inputs.join(","),
        _ => (0..fan_in)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(","),
    };
    let cols = table.select(&origin, "inputs", &spec)?;
    if cols.len() != fan_in {
        anyhow::bail!(FerroError::arg(
            "inputs",
            spec,
            format!("the model takes {fan_in} inputs; name exactly {fan_in} columns")
        ));
    }
    Ok(table.gather(&cols))
}

fn flag_inputs(values: &[String], fan_in: usize) -> anyhow::Result<Vec<f32>> {
    let mut x = Vec::new();
    for v in values.iter().flat_map(|s| s.split(',')) {
        let t = v.trim();
        let f: f32 = t.parse().map_err(|_| {
            FerroError::arg(
                "x",
                t,
                "inputs are numbers separated by commas, e.g. --x 0.1,0.5",
            )
        })?;
        if !f.is_finite() {
            anyhow::bail!(FerroError::arg("x", t, "inputs must be finite numbers"));
        }
        x.push(f);
    }
    if x.len() % fan_in != 0 {
        anyhow::bail!(FerroError::arg(
            "x",
            values.join(" "),
            format!(
                "the model takes {fan_in} inputs per point; give a multiple of {fan_in} values"
            )
        ));
    }
    Ok(x)
}

fn csv(x: &[f32], y: &[f32], fi: usize, fo: usize, ins: &[String], outs: &[String]) -> String {
    let mut out = ins
        .iter()
        .chain(outs)
        .cloned()
        .collect::<Vec<_>>()
        .join(",")
        + "\n";
    for (xr, yr) in x.chunks_exact(fi).zip(y.chunks_exact(fo)) {
        let row: Vec<String> = xr.iter().chain(yr).map(|v| v.to_string()).collect();
        out += &(row.join(",") + "\n");
    }
    out
}

fn json(x: &[f32], y: &[f32], fi: usize, fo: usize, ins: &[String], outs: &[String]) -> String {
    let rows: Vec<serde_json::Value> = x
        .chunks_exact(fi)
        .zip(y.chunks_exact(fo))
        .map(|(xr, yr)| {
            let mut m = serde_json::Map::new();
            for (k, v) in ins.iter().zip(xr).chain(outs.iter().zip(yr)) {
                m.insert(k.clone(), serde_json::json!(v));
            }
            serde_json::Value::Object(m)
        })
        .collect();
    serde_json::to_string_pretty(&rows).expect("numbers serialise") + "\n"
}
