//! `ferrofit predict --model DIR (--csv FILE | --x VALUES)`: runs a saved
//! model on new inputs, in the data's own units (the encodings and
//! standardisation saved with a `--csv` model are applied both ways). A CSV
//! comes back whole with `predicted_<target>` beside its columns, and when
//! it still holds the target, the error against it is reported.

use super::log::note;
use clap::Args;
use ferrofit::columns::{Missing, MissingPolicy, DEFAULT_MARKERS};
use ferrofit::csv::Table;
use ferrofit::error::FerroError;
use ferrofit::io::write_atomic;
use ferrofit::model::reference;
use ferrofit::userdata::{self, Normalization};
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
    /// A --csv row with a missing input: stop with its line (error), or keep
    /// the row with an empty prediction (drop).
    #[arg(long, value_enum, default_value = "error")]
    missing: MissingPolicy,
    /// Cell texts that mean missing, comma-separated (an empty cell always does).
    #[arg(long, value_delimiter = ',', default_values = DEFAULT_MARKERS)]
    missing_values: Vec<String>,
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
                anyhow::bail!(ferrofit::FerroError::arg(
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
    let ferrofit::save::SavedModel {
        params,
        activation: act,
        normalization: norm,
    } = ferrofit::save::load_model(&file)?;
    let fan_in = params.layers[0].fan_in;
    let fan_out = params.layers[params.layers.len() - 1].fan_out;
    let targets: Vec<String> = norm.as_ref().map_or_else(
        || (0..fan_out).map(|i| format!("y{i}")).collect(),
        |n| n.targets.clone(),
    );
    let predicted: Vec<String> = targets.iter().map(|t| format!("predicted_{t}")).collect();
    let predict = |mut x: Vec<f32>, norm: Option<&Normalization>| {
        let mut y = reference::predict(&params, act, &x);
        if let Some(n) = norm {
            n.outputs_to_file(&mut y);
        }
        x.clear();
        y
    };
    let text = match (&a.csv, a.x.is_empty()) {
        (Some(path), _) => {
            let table = ferrofit::csv::read(path, None)?;
            let origin = path.display().to_string();
            let cols = input_columns(&table, &origin, a.inputs.as_deref(), norm.as_ref(), fan_in)?;
            let missing = Missing(a.missing_values.clone());
            let drop = a.missing == MissingPolicy::Drop;
            let (x, present) =
                userdata::model_inputs(&table, &origin, &cols, norm.as_ref(), &missing, drop)?;
            let y = predict(x, norm.as_ref());
            let skipped = present.iter().filter(|p| !**p).count();
            if skipped > 0 {
                note!("{skipped} rows have a missing input: their prediction is left empty");
            }
            for line in errors(&table, &targets, &present, &y, fan_out, &missing) {
                note!("{line}");
            }
            let json = a
                .out
                .as_deref()
                .and_then(Path::extension)
                .is_some_and(|e| e == "json");
            table_out(&table, &predicted, &present, &y, fan_out, json)
        }
        (None, false) => {
            if norm
                .as_ref()
                .is_some_and(|n| n.input_width() != n.inputs.len())
            {
                anyhow::bail!(FerroError::arg(
                    "x",
                    a.x.join(" "),
                    "this model one-hot encodes text columns: give its inputs as a CSV with --csv"
                ));
            }
            let raw = flag_inputs(&a.x, fan_in)?;
            let mut x = raw.clone();
            if let Some(n) = &norm {
                n.inputs_to_model(&mut x);
            }
            let y = predict(x, norm.as_ref());
            let names = norm.as_ref().map_or_else(
                || (0..fan_in).map(|i| format!("x{i}")).collect(),
                |n| n.inputs.clone(),
            );
            let header: Vec<String> = names.into_iter().chain(predicted).collect();
            let rows: Vec<Vec<String>> = raw
                .chunks_exact(fan_in)
                .zip(y.chunks_exact(fan_out))
                .map(|(xr, yr)| xr.iter().chain(yr).map(|v| v.to_string()).collect())
                .collect();
            match a.out.as_deref().and_then(Path::extension) {
                Some(e) if e == "json" => json_rows(&header, &rows),
                _ => csv_rows(&header, &rows, ','),
            }
        }
        (None, true) => anyhow::bail!(FerroError::arg(
            "x",
            "(none)",
            "give inputs: --x 0.1,0.5 or --csv FILE"
        )),
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

/// The table's input columns: named with --inputs, else the model's own
/// (by name when the file has a header), else the first `fan_in`.
fn input_columns(
    table: &Table,
    origin: &str,
    inputs: Option<&str>,
    norm: Option<&Normalization>,
    fan_in: usize,
) -> anyhow::Result<Vec<usize>> {
    let spec = match (inputs, norm, &table.header) {
        (Some(s), _, _) => s.to_string(),
        (None, Some(n), Some(_)) => n.inputs.join(","),
        (None, Some(n), None) => (0..n.inputs.len())
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(","),
        (None, None, _) => (0..fan_in)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(","),
    };
    let cols = table.select(origin, "inputs", &spec)?;
    let want = norm.map_or(fan_in, |n| n.inputs.len());
    if cols.len() != want {
        anyhow::bail!(FerroError::arg(
            "inputs",
            spec,
            format!("the model takes {want} input columns; name exactly {want}")
        ));
    }
    Ok(cols)
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

/// The error against the target, where the file still holds it: one line a target.
fn errors(
    table: &Table,
    targets: &[String],
    present: &[bool],
    y: &[f32],
    fan_out: usize,
    missing: &Missing,
) -> Vec<String> {
    let Some(header) = &table.header else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    for (k, name) in targets.iter().enumerate() {
        let Some(c) = header.iter().position(|h| h == name) else {
            continue;
        };
        let (mut n, mut se, mut ae) = (0usize, 0.0f64, 0.0f64);
        let mut row = 0;
        for (r, in_) in present.iter().enumerate() {
            if !in_ {
                continue;
            }
            let cell = table.cell(r, c);
            if let Some(t) =
                ferrofit::csv::number(cell).filter(|v| v.is_finite() && !missing.is(cell))
            {
                let d = y[row * fan_out + k] as f64 - t;
                (n, se, ae) = (n + 1, se + d * d, ae + d.abs());
            }
            row += 1;
        }
        if n > 0 {
            lines.push(format!(
                "against `{name}` ({n} rows): RMSE {:.6}, MAE {:.6} (the file's units)",
                (se / n as f64).sqrt(),
                ae / n as f64
            ));
        }
    }
    lines
}

/// The table's rows with their predictions (empty where a row was left out).
fn table_out(
    table: &Table,
    predicted: &[String],
    present: &[bool],
    y: &[f32],
    fan_out: usize,
    json: bool,
) -> String {
    let mut header: Vec<String> = (0..table.columns).map(|c| table.column_name(c)).collect();
    for p in predicted {
        // A name the file already uses gets a suffix: nothing is shadowed.
        let mut name = p.clone();
        while header.contains(&name) {
            name += "_";
        }
        header.push(name);
    }
    let mut row_y = y.chunks_exact(fan_out.max(1));
    let rows: Vec<Vec<String>> = (0..table.rows())
        .map(|r| {
            let mut cells: Vec<String> = (0..table.columns)
                .map(|c| table.cell(r, c).to_string())
                .collect();
            match (present[r], row_y.next().filter(|_| present[r])) {
                (true, Some(v)) => cells.extend(v.iter().map(|p| p.to_string())),
                _ => cells.extend(std::iter::repeat_n(String::new(), fan_out)),
            }
            cells
        })
        .collect();
    if json {
        json_rows(&header, &rows)
    } else {
        csv_rows(&header, &rows, table.delimiter)
    }
}

fn quote(cell: &str, delim: char) -> String {
    if cell.contains(delim) || cell.contains('"') || cell.starts_with(' ') || cell.ends_with(' ') {
        format!("\"{}\"", cell.replace('"', "\"\""))
    } else {
        cell.to_string()
    }
}

fn csv_rows(header: &[String], rows: &[Vec<String>], delim: char) -> String {
    let line = |cells: &[String]| {
        cells
            .iter()
            .map(|c| quote(c, delim))
            .collect::<Vec<_>>()
            .join(&delim.to_string())
            + "\n"
    };
    let mut out = line(header);
    for r in rows {
        out += &line(r);
    }
    out
}

/// Rows as JSON objects: numbers as numbers, empty cells as null, text as strings.
fn json_rows(header: &[String], rows: &[Vec<String>]) -> String {
    let rows: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            let mut m = serde_json::Map::new();
            for (k, v) in header.iter().zip(r) {
                let value = match ferrofit::csv::number(v).filter(|x| x.is_finite()) {
                    Some(x) => serde_json::json!(x),
                    None if v.is_empty() => serde_json::Value::Null,
                    None => serde_json::json!(v),
                };
                m.insert(k.clone(), value);
            }
            serde_json::Value::Object(m)
        })
        .collect();
    serde_json::to_string_pretty(&rows).expect("numbers and text serialise") + "\n"
}
