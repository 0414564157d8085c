//! How a selected CSV column becomes model inputs. A column of numbers is
//! read as it is; a column of text (names, categories) — or one named in
//! `--categorical` — is one-hot encoded over the categories the training file
//! holds, and those categories are saved with the model so `predict` encodes
//! the same way. Cells that say "missing" (`NA`, empty, … : [`Missing`]) are
//! dropped with their row or refused, as the job asks.

use crate::csv::{decimal_comma, number, truncate, Table};
use clap::ValueEnum;
use serde::{Deserialize, Serialize};

/// The most categories one column may have: beyond this, one-hot inputs
/// outnumber what a small net can use, and the column is likely an identifier.
pub const MAX_CATEGORIES: usize = 256;

/// What a row with a missing cell in a selected column does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum MissingPolicy {
    /// Stop with the row's line and column (the default: nothing is dropped unasked).
    #[default]
    Error,
    /// Leave the row out and count it.
    Drop,
}

/// The cell texts that mean "missing" (an empty cell always does).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Missing(pub Vec<String>);

impl Default for Missing {
    fn default() -> Self {
        Missing(DEFAULT_MARKERS.iter().map(|s| s.to_string()).collect())
    }
}

/// `--missing-values`' default.
pub const DEFAULT_MARKERS: [&str; 4] = ["NA", "N/A", "NaN", "nan"];

impl Missing {
    /// Whether `cell` is a missing value.
    pub fn is(&self, cell: &str) -> bool {
        cell.is_empty() || self.0.iter().any(|m| m == cell)
    }
}

/// What a column holds, learned from the training file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// A number, used as it is (then standardised).
    Number,
    /// One of these categories (sorted), one-hot: one model input each.
    Categories(Vec<String>),
}

impl Encoding {
    /// Model inputs the column becomes.
    pub fn width(&self) -> usize {
        match self {
            Encoding::Number => 1,
            Encoding::Categories(c) => c.len(),
        }
    }

    /// The model inputs' names: the column's, or `column=category` each.
    pub fn names(&self, column: &str) -> Vec<String> {
        match self {
            Encoding::Number => vec![column.to_string()],
            Encoding::Categories(c) => c.iter().map(|v| format!("{column}={v}")).collect(),
        }
    }

    /// Appends `cell`'s model inputs to `out`; the error says what is wrong
    /// with the cell and how to fix it. `cell` is not missing.
    pub fn encode(&self, cell: &str, delimiter: char, out: &mut Vec<f32>) -> Result<(), String> {
        match self {
            Encoding::Number => match number(cell) {
                Some(v) if v.is_finite() && v.abs() <= f32::MAX as f64 => {
                    out.push(v as f32);
                    Ok(())
                }
                Some(v) if v.is_finite() => Err(format!(
                    "`{}` is beyond f32's range (±3.4e38): rescale the column",
                    truncate(cell)
                )),
                Some(_) => Err(format!(
                    "`{cell}` is not finite: fill in a value, or pass --missing-values {cell} and --missing drop"
                )),
                None if decimal_comma(cell, delimiter) => Err(format!(
                    "`{}` is not a number: use a decimal point (1.5), not a decimal comma",
                    truncate(cell)
                )),
                None => Err(format!("`{}` is not a number", truncate(cell))),
            },
            Encoding::Categories(cats) => match cats.binary_search_by(|c| c.as_str().cmp(cell)) {
                Ok(k) => {
                    out.extend((0..cats.len()).map(|i| if i == k { 1.0 } else { 0.0 }));
                    Ok(())
                }
                Err(_) => Err(format!(
                    "`{}` is a category the model was not trained on (it knows {})",
                    truncate(cell),
                    shown(cats)
                )),
            },
        }
    }
}

/// A list of categories for a message (the first 10).
fn shown(cats: &[String]) -> String {
    let mut s = cats.iter().take(10).cloned().collect::<Vec<_>>().join(", ");
    if cats.len() > 10 {
        s += &format!(", … ({} in all)", cats.len());
    }
    s
}

/// What a column may become.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// Numbers only (a target: ferrofit fits regression).
    Number,
    /// Numbers, or categories when most cells are text (an input).
    Auto,
    /// Categories, even of numbers (`--categorical`).
    Categories,
}

/// Learns column `c`'s encoding from its non-missing cells: numbers when
/// every one is a number; categories when asked or when most are text (and
/// `want` allows them). A number column with a few text cells is an error at
/// the first (a typo is likelier than a category), as is a column with no
/// values or with more than [`MAX_CATEGORIES`] categories. The error, with
/// the row it is about, says the fix.
pub fn learn(
    table: &Table,
    c: usize,
    missing: &Missing,
    want: Want,
) -> Result<Encoding, (usize, String)> {
    let categorical = want == Want::Categories;
    let name = table.column_name(c);
    let cells = (0..table.rows())
        .map(|r| (r, table.cell(r, c)))
        .filter(|(_, v)| !missing.is(v));
    let (mut numbers, mut texts, mut first_text) = (0usize, 0usize, None);
    let mut values = std::collections::BTreeSet::new();
    for (r, v) in cells {
        if number(v).is_some() {
            numbers += 1;
        } else {
            texts += 1;
            first_text.get_or_insert(r);
        }
        if categorical || values.len() <= MAX_CATEGORIES {
            values.insert(v);
        }
    }
    if numbers + texts == 0 {
        return Err((
            0,
            format!("column `{name}` has no values, only missing cells: leave it out"),
        ));
    }
    if !categorical && texts == 0 {
        return Ok(Encoding::Number);
    }
    if !categorical && (texts < numbers || want == Want::Number) {
        let r = first_text.unwrap_or(0);
        let cell = table.cell(r, c);
        let why = Encoding::Number
            .encode(cell, table.delimiter, &mut Vec::new())
            .err()
            .unwrap_or_default();
        let fix = if want == Want::Number {
            "a target holds numbers (ferrofit fits regression): fix the cell, mark such cells missing (--missing-values), or choose another target".to_string()
        } else {
            format!(
                "in a column of numbers ({numbers} numbers, {texts} other cells): fix the cell, mark such cells missing (--missing-values {}), or one-hot encode the column (--categorical {name})",
                truncate(cell)
            )
        };
        return Err((r, format!("column `{name}`: {why}; {fix}")));
    }
    if values.len() > MAX_CATEGORIES {
        return Err((
            0,
            format!(
                "column `{name}` has more than {MAX_CATEGORIES} different values, each of which would become an input: leave it out of --inputs (an identifier?), or group its values"
            ),
        ));
    }
    Ok(Encoding::Categories(
        values.into_iter().map(String::from).collect(),
    ))
}

/// Why a row could not be encoded: `Missing(c)` or `Bad(c, why)`, `c` the
/// table column.
#[derive(Debug, PartialEq)]
pub enum RowProblem {
    /// A missing cell in this table column.
    Missing(usize),
    /// A cell of this table column that is not what the column holds, and why.
    Bad(usize, String),
}

/// Appends row `r`'s model inputs from `cols` (encoded by `encodings`) to `out`.
pub fn encode_row(
    table: &Table,
    r: usize,
    cols: &[usize],
    encodings: &[Encoding],
    missing: &Missing,
    out: &mut Vec<f32>,
) -> Result<(), RowProblem> {
    for (&c, enc) in cols.iter().zip(encodings) {
        let cell = table.cell(r, c);
        if missing.is(cell) {
            return Err(RowProblem::Missing(c));
        }
        enc.encode(cell, table.delimiter, out)
            .map_err(|why| RowProblem::Bad(c, why))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Table {
        crate::csv::parse(text, "d.csv", None).unwrap()
    }

    #[test]
    fn numbers_text_and_missing_cells_are_told_apart() {
        let t = table("n,s,m,typo,inf\n1,b,NA,1,1\n2,a,,2,inf\n3,b,3,x,3\n4,c,4,4,4\n");
        let miss = Missing::default();
        let auto = Want::Auto;
        assert_eq!(learn(&t, 0, &miss, auto), Ok(Encoding::Number));
        let cats = learn(&t, 1, &miss, auto).unwrap();
        assert_eq!(
            cats,
            Encoding::Categories(vec!["a".into(), "b".into(), "c".into()])
        );
        assert_eq!(cats.names("s"), ["s=a", "s=b", "s=c"]);
        let mut out = Vec::new();
        cats.encode("b", ',', &mut out).unwrap();
        assert_eq!(out, [0.0, 1.0, 0.0]);
        let e = cats.encode("z", ',', &mut out).unwrap_err();
        assert!(e.contains("not trained on") && e.contains("a, b, c"), "{e}");
        assert_eq!(learn(&t, 2, &miss, auto), Ok(Encoding::Number));
        let (row, e) = learn(&t, 3, &miss, auto).unwrap_err();
        assert_eq!(row, 2);
        assert!(
            e.contains("`x` is not a number") && e.contains("--categorical typo"),
            "{e}"
        );
        // A number column may be declared categorical (a year, a code).
        let years = learn(&t, 0, &miss, Want::Categories).unwrap();
        assert_eq!(years.width(), 4);
        // `inf` parses, but is no value to train on.
        assert_eq!(learn(&t, 4, &miss, auto), Ok(Encoding::Number));
        // A target is numbers only: text in it is named, whatever the mix.
        let (row, e) = learn(&t, 1, &miss, Want::Number).unwrap_err();
        assert_eq!(row, 0);
        assert!(
            e.contains("`b` is not a number") && e.contains("regression"),
            "{e}"
        );
        let e = Encoding::Number.encode("inf", ',', &mut out).unwrap_err();
        assert!(e.contains("not finite"), "{e}");
        assert!(learn(&table("a\nNA\n\n"), 0, &miss, auto).is_err());
    }

    #[test]
    fn an_identifier_column_is_refused() {
        let mut text = String::from("id\n");
        for i in 0..=MAX_CATEGORIES {
            text += &format!("p{i}\n");
        }
        let (_, e) = learn(&table(&text), 0, &Missing::default(), Want::Auto).unwrap_err();
        assert!(e.contains("identifier"), "{e}");
    }
}
