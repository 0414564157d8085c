//! User data for training: a CSV table becomes a training set and a held-out
//! validation set (rows shuffled with the seed), each column standardised with
//! the training rows' mean and standard deviation. The statistics travel with
//! the model, so `predict` takes and returns values in the file's own units.

use crate::config::CsvSpec;
use crate::csv;
use crate::error::{FerroError, Result};
use crate::rng::{stream, uniform};
use crate::task::Dataset;
use serde::{Deserialize, Serialize};

/// Column names and the standardisation applied to them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Normalization {
    pub inputs: Vec<String>,
    pub targets: Vec<String>,
    pub x_mean: Vec<f64>,
    pub x_std: Vec<f64>,
    pub y_mean: Vec<f64>,
    pub y_std: Vec<f64>,
}

/// Mean and standard deviation (1 where a column is constant) of each column.
fn stats(v: &[f32], cols: usize) -> (Vec<f64>, Vec<f64>) {
    let rows = (v.len() / cols.max(1)).max(1) as f64;
    let mean: Vec<f64> = (0..cols)
        .map(|c| {
            v.iter()
                .skip(c)
                .step_by(cols)
                .map(|&x| x as f64)
                .sum::<f64>()
                / rows
        })
        .collect();
    let std = (0..cols)
        .map(|c| {
            let var = v
                .iter()
                .skip(c)
                .step_by(cols)
                .map(|&x| (x as f64 - mean[c]).powi(2))
                .sum::<f64>()
                / rows;
            if var > 0.0 {
                var.sqrt()
            } else {
                1.0
            }
        })
        .collect();
    (mean, std)
}

fn standardise(v: &mut [f32], mean: &[f64], std: &[f64]) {
    let cols = mean.len();
    for (i, x) in v.iter_mut().enumerate() {
        *x = ((*x as f64 - mean[i % cols]) / std[i % cols]) as f32;
    }
}

impl Normalization {
    /// Inputs in file units → model units.
    pub fn inputs_to_model(&self, x: &mut [f32]) {
        standardise(x, &self.x_mean, &self.x_std);
    }

    /// Model outputs → file units.
    pub fn outputs_to_file(&self, y: &mut [f32]) {
        let cols = self.y_mean.len();
        for (i, v) in y.iter_mut().enumerate() {
            *v = (*v as f64 * self.y_std[i % cols] + self.y_mean[i % cols]) as f32;
        }
    }
}

/// A CSV job's data, ready to train on.
#[derive(Clone, Debug)]
pub struct UserData {
    pub train: Dataset,
    pub val: Option<Dataset>,
    pub norm: Normalization,
}

/// Reads `spec`'s file, selects and standardises its columns, splits off validation rows.
pub fn load(spec: &CsvSpec, seed: u64) -> Result<UserData> {
    let table = csv::read(std::path::Path::new(&spec.path), spec.delimiter)?;
    let ins = table.select(&spec.path, "inputs", &spec.inputs)?;
    let outs = table.select(&spec.path, "target", &spec.targets)?;
    if let Some(c) = ins.iter().find(|c| outs.contains(c)) {
        return Err(FerroError::arg(
            "target",
            table.column_name(*c),
            "a column cannot be both an input and a target",
        ));
    }
    // Shuffle row order with the seed, then hold out the last `val_split` of it.
    let mut order: Vec<usize> = (0..table.rows()).collect();
    for i in (1..order.len()).rev() {
        let j = (uniform(seed, stream::SPLIT, i as u64) * (i + 1) as f64) as usize;
        order.swap(i, j.min(i));
    }
    let n_val = (table.rows() as f64 * spec.val_split).floor() as usize;
    if table.rows() - n_val == 0 {
        return Err(FerroError::arg(
            "val-split",
            spec.val_split,
            format!(
                "{} has {} rows, too few to hold any out",
                spec.path,
                table.rows()
            ),
        ));
    }
    let t = &table;
    let rows = |idx: &[usize], cols: &[usize]| -> Vec<f32> {
        idx.iter()
            .flat_map(|&r| {
                cols.iter()
                    .map(move |&c| t.values[r * t.columns + c] as f32)
            })
            .collect()
    };
    let (train_idx, val_idx) = order.split_at(table.rows() - n_val);
    let (mut x, mut y) = (rows(train_idx, &ins), rows(train_idx, &outs));
    let (x_mean, x_std) = stats(&x, ins.len());
    let (y_mean, y_std) = stats(&y, outs.len());
    let norm = Normalization {
        inputs: ins.iter().map(|&c| table.column_name(c)).collect(),
        targets: outs.iter().map(|&c| table.column_name(c)).collect(),
        x_mean,
        x_std,
        y_mean,
        y_std,
    };
    standardise(&mut x, &norm.x_mean, &norm.x_std);
    standardise(&mut y, &norm.y_mean, &norm.y_std);
    let val = (!val_idx.is_empty()).then(|| {
        let (mut vx, mut vy) = (rows(val_idx, &ins), rows(val_idx, &outs));
        standardise(&mut vx, &norm.x_mean, &norm.x_std);
        standardise(&mut vy, &norm.y_mean, &norm.y_std);
        Dataset {
            x: vx,
            y: vy,
            inputs: ins.len(),
            outputs: outs.len(),
        }
    });
    Ok(UserData {
        train: Dataset {
            x,
            y,
            inputs: ins.len(),
            outputs: outs.len(),
        },
        val,
        norm,
    })
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
}
