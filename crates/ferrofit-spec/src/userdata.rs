//! User data for training: a CSV table's selected columns become a training
//! set and a held-out validation set (rows shuffled with the seed): numbers
//! as they are, text columns one-hot (`columns.rs`), rows with missing cells
//! dropped and counted or refused; each model input standardised with the
//! training rows' mean and standard deviation. The encodings and statistics
//! travel with the model, so `predict` takes and returns the file's own units.

use crate::columns::{self, Encoding, MissingPolicy, RowProblem, Want};
use crate::config::CsvSpec;
use crate::csv::{self, Table};
use crate::error::{FerroError, Result};
pub use crate::normalization::Normalization;
use crate::normalization::{standardise, stats};
pub use crate::predict_inputs::model_inputs;
use crate::rng::{stream, uniform};
use crate::task::Dataset;

/// A CSV job's data, ready to train on.
#[derive(Clone, Debug)]
pub struct UserData {
    /// The rows that train.
    pub train: Dataset,
    /// The rows held out for the validation loss.
    pub val: Option<Dataset>,
    /// The standardisation, from the training rows.
    pub norm: Normalization,
    /// Rows left out for a missing cell (`--missing drop`).
    pub dropped: usize,
}

/// Reads `spec`'s file, encodes and standardises its selected columns, splits off validation rows.
pub fn load(spec: &CsvSpec, seed: u64) -> Result<UserData> {
    let table = csv::read(std::path::Path::new(&spec.path), spec.delimiter)?;
    from_table(&table, spec, seed)
}

/// An error at row `r` of `table` (its file line in the message).
fn at(spec: &CsvSpec, table: &Table, r: usize, detail: String) -> FerroError {
    table.error_at(&spec.path, r, detail)
}

/// [`load`] on a table already read.
pub fn from_table(table: &Table, spec: &CsvSpec, seed: u64) -> Result<UserData> {
    let ins = table.select(&spec.path, "inputs", &spec.inputs)?;
    let outs = table.select(&spec.path, "target", &spec.targets)?;
    if let Some(c) = ins.iter().find(|c| outs.contains(c)) {
        return Err(FerroError::arg(
            "target",
            table.column_name(*c),
            "a column cannot be both an input and a target",
        ));
    }
    let forced = match spec.categorical.trim() {
        "" => Vec::new(),
        list => table.select(&spec.path, "categorical", list)?,
    };
    if let Some(c) = forced.iter().find(|c| !ins.contains(c)) {
        return Err(FerroError::arg(
            "categorical",
            table.column_name(*c),
            "only input columns are one-hot encoded: add it to --inputs, or leave it out here",
        ));
    }
    let learn = |c: usize, want: Want| {
        columns::learn(table, c, &spec.missing_values, want).map_err(|(r, e)| at(spec, table, r, e))
    };
    let in_enc = ins
        .iter()
        .map(|&c| {
            learn(
                c,
                if forced.contains(&c) {
                    Want::Categories
                } else {
                    Want::Auto
                },
            )
        })
        .collect::<Result<Vec<_>>>()?;
    let out_enc = outs
        .iter()
        .map(|&c| learn(c, Want::Number))
        .collect::<Result<Vec<_>>>()?;
    // Every row encoded (or dropped), in file order.
    let (mut xs, mut ys, mut kept, mut dropped) = (Vec::new(), Vec::new(), 0usize, 0usize);
    for r in 0..table.rows() {
        let (x0, y0) = (xs.len(), ys.len());
        let row = columns::encode_row(table, r, &ins, &in_enc, &spec.missing_values, &mut xs)
            .and_then(|()| {
                columns::encode_row(table, r, &outs, &out_enc, &spec.missing_values, &mut ys)
            });
        match row {
            Ok(()) => kept += 1,
            Err(RowProblem::Missing(_)) if spec.missing == MissingPolicy::Drop => {
                xs.truncate(x0);
                ys.truncate(y0);
                dropped += 1;
            }
            Err(RowProblem::Missing(c)) => {
                return Err(at(
                    spec,
                    table,
                    r,
                    format!(
                        "column `{}` is missing (`{}`): pass --missing drop to leave such rows out, or fill the cell",
                        table.column_name(c),
                        table.cell(r, c)
                    ),
                ))
            }
            Err(RowProblem::Bad(c, why)) => {
                return Err(at(
                    spec,
                    table,
                    r,
                    format!("column `{}`: {why}", table.column_name(c)),
                ))
            }
        }
    }
    if kept == 0 {
        return Err(at(
            spec,
            table,
            0,
            format!(
                "every one of its {} rows has a missing cell in the selected columns: choose other columns",
                table.rows()
            ),
        ));
    }
    let columns = Columns {
        inputs: ins.iter().map(|&c| table.column_name(c)).collect(),
        targets: outs.iter().map(|&c| table.column_name(c)).collect(),
        encodings: in_enc,
    };
    if kept - (kept as f64 * spec.val_split).floor() as usize == 0 {
        return Err(FerroError::arg(
            "val-split",
            spec.val_split,
            format!(
                "{} has {kept} usable rows, too few to hold any out",
                spec.path
            ),
        ));
    }
    let mut d = split(xs, ys, columns, spec.val_split, seed);
    d.dropped = dropped;
    Ok(d)
}

/// Names and encodings of a job's columns.
pub struct Columns {
    /// Input column names.
    pub inputs: Vec<String>,
    /// Target column names.
    pub targets: Vec<String>,
    /// One an input column.
    pub encodings: Vec<Encoding>,
}

/// Encoded rows (`xs`: row-major model inputs, `ys`: targets) shuffled with
/// the seed, the last `val_split` of them held out, standardised with the
/// training rows' statistics. At least one row stays for training.
pub fn split(xs: Vec<f32>, ys: Vec<f32>, columns: Columns, val_split: f64, seed: u64) -> UserData {
    let width = columns
        .encodings
        .iter()
        .map(Encoding::width)
        .sum::<usize>()
        .max(1);
    let outputs = columns.targets.len().max(1);
    let rows = xs.len() / width;
    let mut order: Vec<usize> = (0..rows).collect();
    for i in (1..order.len()).rev() {
        let j = (uniform(seed, stream::SPLIT, i as u64) * (i + 1) as f64) as usize;
        order.swap(i, j.min(i));
    }
    let n_val = ((rows as f64 * val_split).floor() as usize).min(rows.saturating_sub(1));
    let pick = |idx: &[usize], v: &[f32], k: usize| -> Vec<f32> {
        idx.iter()
            .flat_map(|&r| v[r * k..(r + 1) * k].iter().copied())
            .collect()
    };
    let (train_idx, val_idx) = order.split_at(rows - n_val);
    let (mut x, mut y) = (pick(train_idx, &xs, width), pick(train_idx, &ys, outputs));
    let (x_mean, x_std) = stats(&x, width);
    let (y_mean, y_std) = stats(&y, outputs);
    let numbers = columns.encodings.iter().all(|e| *e == Encoding::Number);
    let norm = Normalization {
        inputs: columns.inputs,
        targets: columns.targets,
        encodings: if numbers {
            Vec::new()
        } else {
            columns.encodings
        },
        x_mean,
        x_std,
        y_mean,
        y_std,
    };
    standardise(&mut x, &norm.x_mean, &norm.x_std);
    standardise(&mut y, &norm.y_mean, &norm.y_std);
    let val = (!val_idx.is_empty()).then(|| {
        let (mut vx, mut vy) = (pick(val_idx, &xs, width), pick(val_idx, &ys, outputs));
        standardise(&mut vx, &norm.x_mean, &norm.x_std);
        standardise(&mut vy, &norm.y_mean, &norm.y_std);
        Dataset {
            x: vx,
            y: vy,
            inputs: width,
            outputs,
        }
    });
    UserData {
        train: Dataset {
            x,
            y,
            inputs: width,
            outputs,
        },
        val,
        norm,
        dropped: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_standardises_and_round_trips_units() {
        let dir = std::env::temp_dir().join(format!("ferrofit-ud-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("d.csv");
        let mut text = String::from("a,b,y\n");
        for i in 0..100 {
            text += &format!("{i},{},{}\n", 2 * i, 3 * i + 1);
        }
        std::fs::write(&path, text).unwrap();
        let spec = CsvSpec {
            path: path.display().to_string(),
            inputs: "a,b".into(),
            targets: "y".into(),
            val_split: 0.2,
            delimiter: None,
            ..CsvSpec::default()
        };
        let d = load(&spec, 1).unwrap();
        assert_eq!((d.train.len(), d.val.as_ref().unwrap().len()), (80, 20));
        assert_eq!((d.train.inputs, d.train.outputs), (2, 1));
        let mean: f32 = d.train.y.iter().sum::<f32>() / 80.0;
        assert!(mean.abs() < 1e-5);
        // Standardised targets map back to the file's units.
        let mut y = d.train.y.clone();
        d.norm.outputs_to_file(&mut y);
        let mut x = d.train.x.clone();
        for (i, v) in y.iter().enumerate() {
            let a = (x[2 * i] as f64 * d.norm.x_std[0] + d.norm.x_mean[0]) as f32;
            assert!((v - (3.0 * a + 1.0)).abs() < 1e-3, "{v} vs {a}");
        }
        d.norm.inputs_to_model(&mut x);
        let e = load(
            &CsvSpec {
                targets: "a".into(),
                ..spec
            },
            1,
        )
        .unwrap_err();
        assert!(e.to_string().contains("both an input and a target"), "{e}");
    }

    /// A file as people download it: a text column nobody selected, a text
    /// input, `NA` and empty cells.
    #[test]
    fn text_columns_are_encoded_and_missing_rows_dropped_or_refused() {
        let text =
            "name,kind,size,weight\nann,a,1,10\nbob,b,2,NA\ncid,,3,30\ndan,b,4,40\neve,a,5,50\n";
        let table = csv::parse(text, "p.csv", None).unwrap();
        let spec = CsvSpec {
            path: "p.csv".into(),
            inputs: "kind,size".into(),
            targets: "weight".into(),
            val_split: 0.0,
            ..CsvSpec::default()
        };
        let e = from_table(&table, &spec, 1).unwrap_err().to_string();
        assert!(
            e.contains("p.csv line 3")
                && e.contains("`weight` is missing")
                && e.contains("--missing drop"),
            "{e}"
        );
        let drop = CsvSpec {
            missing: MissingPolicy::Drop,
            ..spec.clone()
        };
        let d = from_table(&table, &drop, 1).unwrap();
        assert_eq!((d.dropped, d.train.len(), d.train.inputs), (2, 3, 3));
        assert_eq!(d.norm.input_names(), ["kind=a", "kind=b", "size"]);
        assert_eq!(d.norm.input_width(), 3);
        // The model file keeps the categories; a numbers-only job writes none.
        let json = serde_json::to_string(&d.norm).unwrap();
        assert!(json.contains("\"categories\":[\"a\",\"b\"]"), "{json}");
        let plain = CsvSpec {
            inputs: "size".into(),
            ..drop.clone()
        };
        let n = from_table(&table, &plain, 1).unwrap().norm;
        assert!(!serde_json::to_string(&n).unwrap().contains("encodings"));
        // A text target is not regression; a categorical flag must name an input.
        let e = from_table(
            &table,
            &CsvSpec {
                targets: "name".into(),
                ..drop.clone()
            },
            1,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("p.csv line 2") && e.contains("regression"),
            "{e}"
        );
        let e = from_table(
            &table,
            &CsvSpec {
                categorical: "weight".into(),
                ..drop.clone()
            },
            1,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("only input columns"), "{e}");
        // A number column with a typo, or a decimal comma.
        let t = csv::parse("a;b\n1;2\n3;4,5\n5;6\n", "c.csv", None).unwrap();
        let s = CsvSpec {
            path: "c.csv".into(),
            inputs: "a".into(),
            targets: "b".into(),
            ..CsvSpec::default()
        };
        let e = from_table(&t, &s, 1).unwrap_err().to_string();
        assert!(
            e.contains("c.csv line 3") && e.contains("decimal point"),
            "{e}"
        );
    }
}
