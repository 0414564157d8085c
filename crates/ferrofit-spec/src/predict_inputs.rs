//! The prediction side of user data: a table's rows encoded and
//! standardised as a saved model's [`Normalization`] says, for `predict`
//! (the training side, which makes those statistics, is [`crate::userdata`]).

use crate::columns::{self, Encoding, RowProblem};
use crate::csv::Table;
use crate::error::Result;
use crate::normalization::Normalization;

/// A table's rows as model inputs for `predict`: `cols` encoded as the
/// model's [`Normalization`] says (numbers when there is none), in model
/// units. Rows with a missing cell are left out when `drop_missing`, else an
/// error; the second value says which rows are in.
pub fn model_inputs(
    table: &Table,
    origin: &str,
    cols: &[usize],
    norm: Option<&Normalization>,
    missing: &columns::Missing,
    drop_missing: bool,
) -> Result<(Vec<f32>, Vec<bool>)> {
    let encodings = norm.map_or_else(|| vec![Encoding::Number; cols.len()], |n| n.encodings());
    let bad = |r: usize, detail: String| table.error_at(origin, r, detail);
    let (mut x, mut present) = (Vec::new(), Vec::with_capacity(table.rows()));
    for r in 0..table.rows() {
        let before = x.len();
        match columns::encode_row(table, r, cols, &encodings, missing, &mut x) {
            Ok(()) => present.push(true),
            Err(RowProblem::Missing(_)) if drop_missing => {
                x.truncate(before);
                present.push(false);
            }
            Err(RowProblem::Missing(c)) => {
                return Err(bad(
                    r,
                    format!(
                        "column `{}` is missing (`{}`): pass --missing drop to leave such rows without a prediction, or fill the cell",
                        table.column_name(c),
                        table.cell(r, c)
                    ),
                ))
            }
            Err(RowProblem::Bad(c, why)) => {
                return Err(bad(r, format!("column `{}`: {why}", table.column_name(c))))
            }
        }
    }
    if let Some(n) = norm {
        n.inputs_to_model(&mut x);
    }
    Ok((x, present))
}
