//! The standardisation a `--csv` job trains in, saved with its model: each
//! model input and target shifted by the training rows' mean and scaled by
//! their standard deviation, with the column names and encodings, so
//! `predict` takes and returns values in the file's own units.

use crate::columns::Encoding;
use serde::{Deserialize, Serialize};

/// Column names and the standardisation applied to them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Normalization {
    /// The file's input columns.
    pub inputs: Vec<String>,
    /// Target column names.
    pub targets: Vec<String>,
    /// How each input column becomes model inputs (absent in files written
    /// before text columns were encoded: every column a number).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub encodings: Vec<Encoding>,
    /// One a model input (a one-hot column counts one a category).
    pub x_mean: Vec<f64>,
    /// Standard deviation of each model input.
    pub x_std: Vec<f64>,
    /// Mean of each target.
    pub y_mean: Vec<f64>,
    /// Standard deviation of each target.
    pub y_std: Vec<f64>,
}

/// Mean and standard deviation (1 where a column is constant) of each column.
pub(crate) fn stats(v: &[f32], cols: usize) -> (Vec<f64>, Vec<f64>) {
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

pub(crate) fn standardise(v: &mut [f32], mean: &[f64], std: &[f64]) {
    let cols = mean.len();
    for (i, x) in v.iter_mut().enumerate() {
        *x = ((*x as f64 - mean[i % cols]) / std[i % cols]) as f32;
    }
}

impl Normalization {
    /// No standardisation: `k` inputs `x0…`, `o` targets `y0…` (a model
    /// trained on a built-in task).
    pub fn identity(k: usize, o: usize) -> Normalization {
        Normalization {
            inputs: (0..k).map(|i| format!("x{i}")).collect(),
            targets: (0..o).map(|i| format!("y{i}")).collect(),
            encodings: Vec::new(),
            x_mean: vec![0.0; k],
            x_std: vec![1.0; k],
            y_mean: vec![0.0; o],
            y_std: vec![1.0; o],
        }
    }

    /// Each input column's encoding.
    pub fn encodings(&self) -> Vec<Encoding> {
        if self.encodings.is_empty() {
            vec![Encoding::Number; self.inputs.len()]
        } else {
            self.encodings.clone()
        }
    }

    /// Model inputs: one a number column, one a category of each other.
    pub fn input_width(&self) -> usize {
        self.encodings().iter().map(Encoding::width).sum()
    }

    /// The model inputs' names (`species=Adelie` for a one-hot input).
    pub fn input_names(&self) -> Vec<String> {
        self.inputs
            .iter()
            .zip(self.encodings())
            .flat_map(|(name, e)| e.names(name))
            .collect()
    }

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
