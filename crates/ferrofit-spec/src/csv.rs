//! The CSV reader for user data: delimiter (`,` `;` tab) and header detected,
//! simple double quotes. It checks the table's shape and keeps every cell as
//! text; only the columns a job selects are read as numbers or categories
//! (`columns.rs`), so a text column nobody asked for is never a problem.
//! Every problem is an error with the file, line and what to change; nothing
//! here panics on any input (the fuzz target `fuzz/fuzz_targets/csv.rs`
//! holds it to that).

use crate::error::{FerroError, Result};

/// A parsed table of text cells.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// Column names, when the first row was a header.
    pub header: Option<Vec<String>>,
    /// Every cell's text, one after another, row-major (`rows × columns`
    /// cells; `ends[i]` is where cell `i` ends): one allocation, not one a cell.
    text: String,
    ends: Vec<usize>,
    /// Columns a row.
    pub columns: usize,
    /// 1-based line number of each row in the file (for messages).
    pub lines: Vec<usize>,
    /// The delimiter found.
    pub delimiter: char,
}

impl Table {
    /// Number of data rows.
    pub fn rows(&self) -> usize {
        self.lines.len()
    }

    /// The name of column `c` (0-based): its header name or `#c`.
    pub fn column_name(&self, c: usize) -> String {
        self.header
            .as_ref()
            .and_then(|h| h.get(c).cloned())
            .unwrap_or_else(|| format!("#{c}"))
    }

    /// Resolves a `--inputs` / `--target` list (names, or 0-based indices) to columns.
    pub fn select(&self, origin: &str, flag: &'static str, spec: &str) -> Result<Vec<usize>> {
        let mut out = Vec::new();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let by_name = self
                .header
                .as_ref()
                .and_then(|h| h.iter().position(|n| n == item));
            let col = match (by_name, item.parse::<usize>()) {
                (Some(c), _) => c,
                (None, Ok(i)) if i < self.columns => i,
                _ => {
                    let names: Vec<String> =
                        (0..self.columns).map(|c| self.column_name(c)).collect();
                    return Err(FerroError::arg(
                        flag,
                        item,
                        format!(
                            "{origin} has no such column; its {} columns are {} (name them, or give 0-based indices)",
                            self.columns,
                            names.join(", ")
                        ),
                    ));
                }
            };
            out.push(col);
        }
        if out.is_empty() {
            return Err(FerroError::arg(
                flag,
                spec,
                "name at least one column (comma-separated names or 0-based indices)",
            ));
        }
        Ok(out)
    }

    /// A data error at row `r` of the file `origin` (its line in the message).
    pub fn error_at(&self, origin: &str, r: usize, detail: String) -> crate::FerroError {
        crate::FerroError::Data {
            path: origin.to_string(),
            line: self.lines.get(r).copied().unwrap_or(0),
            detail,
        }
    }

    /// The text of row `r`'s cell in column `c` (0-based, both in range).
    pub fn cell(&self, r: usize, c: usize) -> &str {
        let i = r * self.columns + c;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.text[start..self.ends[i]]
    }
}

/// Parses a number the way a spreadsheet export writes it.
pub fn number(s: &str) -> Option<f64> {
    if s.is_empty() {
        return None;
    }
    s.parse::<f64>().ok()
}

/// Whether a cell that is not a number was meant as one with a decimal comma.
pub fn decimal_comma(cell: &str, delimiter: char) -> bool {
    delimiter != ',' && cell.contains(',') && number(&cell.replace(',', ".")).is_some()
}

fn bad(origin: &str, line: usize, detail: String) -> FerroError {
    FerroError::Data {
        path: origin.to_string(),
        line,
        detail,
    }
}

/// Splits one line on `delim`, honouring double quotes (`""` is a quote).
fn fields(line: &str, delim: char) -> std::result::Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(ch) = chars.next() {
        match (ch, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', true) => quoted = false,
            ('"', false) if cur.trim().is_empty() => {
                cur.clear();
                quoted = true
            }
            (c, false) if c == delim => out.push(std::mem::take(&mut cur)),
            (c, _) => cur.push(c),
        }
    }
    if quoted {
        return Err("a quoted field is not closed: add the closing \"".into());
    }
    out.push(cur);
    Ok(out.into_iter().map(|f| f.trim().to_string()).collect())
}

/// The delimiter that occurs most often in the first line (`,` wins ties).
fn detect_delimiter(first: &str) -> char {
    [',', ';', '\t']
        .into_iter()
        .max_by_key(|&d| (first.matches(d).count(), d == ','))
        .unwrap_or(',')
}

/// Parses CSV text; `origin` names the file in messages. `delimiter` overrides detection.
pub fn parse(text: &str, origin: &str, delimiter: Option<char>) -> Result<Table> {
    let source = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = source
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_end_matches('\r')))
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
    let Some((first_no, first)) = lines.next() else {
        return Err(bad(
            origin,
            0,
            "the file has no rows: give a CSV with one row per point (a header line first is optional)".into(),
        ));
    };
    let delim = delimiter.unwrap_or_else(|| detect_delimiter(first));
    let head = fields(first, delim).map_err(|e| bad(origin, first_no, e))?;
    let columns = head.len();
    let header = if head.iter().all(|f| number(f).is_some()) {
        None
    } else {
        Some(head.clone())
    };
    let mut text = String::new();
    let mut ends = Vec::new();
    let mut line_numbers = Vec::new();
    let mut push_row = |no: usize, row: &[String]| -> Result<()> {
        if row.len() != columns {
            let hint = if row.len() == 1 && columns > 1 {
                format!(
                    "; the line has no `{}` — is it separated by something else? (pass --delimiter)",
                    delim.escape_default()
                )
            } else {
                String::new()
            };
            return Err(bad(
                origin,
                no,
                format!(
                    "{} fields where the first line has {columns}: check for a missing or extra delimiter{hint}",
                    row.len()
                ),
            ));
        }
        for f in row {
            text.push_str(f);
            ends.push(text.len());
        }
        line_numbers.push(no);
        Ok(())
    };
    if header.is_none() {
        push_row(first_no, &head)?;
    }
    for (no, line) in lines {
        let row = fields(line, delim).map_err(|e| bad(origin, no, e))?;
        push_row(no, &row)?;
    }
    if line_numbers.is_empty() {
        return Err(bad(
            origin,
            first_no,
            "only a header, no data rows: add one row per point".into(),
        ));
    }
    Ok(Table {
        header,
        text,
        ends,
        columns,
        lines: line_numbers,
        delimiter: delim,
    })
}

/// At most 40 characters of a cell, for messages.
pub fn truncate(s: &str) -> String {
    let t: String = s.chars().take(40).collect();
    if t.len() < s.len() {
        t + "…"
    } else {
        t
    }
}

/// Reads and parses a CSV file.
pub fn read(path: &std::path::Path, delimiter: Option<char>) -> Result<Table> {
    let origin = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| FerroError::Io {
        action: "reading",
        path: origin.clone(),
        source,
    })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        bad(
            &origin,
            0,
            format!(
                "not UTF-8 text (byte {}): save the file as UTF-8 CSV",
                e.utf8_error().valid_up_to()
            ),
        )
    })?;
    parse(&text, &origin, delimiter)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(text, "d.csv", None).unwrap_err().to_string()
    }

    fn cells(t: &Table) -> Vec<&str> {
        (0..t.rows())
            .flat_map(|r| (0..t.columns).map(move |c| t.cell(r, c)))
            .collect()
    }

    #[test]
    fn reads_header_delimiters_quotes_and_selects_columns() {
        let t = parse("x;\"y 1\";z\n1;2;3\r\n\n4;5e-1;\"a;b\"\n", "d.csv", None).unwrap();
        assert_eq!(t.delimiter, ';');
        assert_eq!(t.header.as_deref().unwrap(), ["x", "y 1", "z"]);
        assert_eq!(cells(&t), ["1", "2", "3", "4", "5e-1", "a;b"]);
        assert_eq!(t.lines, vec![2, 4]);
        assert_eq!(t.select("d.csv", "inputs", "z, 0").unwrap(), vec![2, 0]);
        let t = parse("1\t2\n3\t4\n", "d.csv", None).unwrap();
        assert_eq!((t.header.is_none(), t.delimiter, t.rows()), (true, '\t', 2));
        // Text and missing cells are kept as they are: columns decide (columns.rs).
        let t = parse("a,b\nNA,\ncat,2\n", "d.csv", None).unwrap();
        assert_eq!(cells(&t), ["NA", "", "cat", "2"]);
    }

    #[test]
    fn every_malformed_table_names_file_line_and_fix() {
        assert!(err("").contains("no rows"));
        assert!(err("a,b\n").contains("only a header"));
        let e = err("a,b\n1,2\n3\n");
        assert!(
            e.contains("line 3") && e.contains("1 fields where the first line has 2"),
            "{e}"
        );
        let e = err("a,\"b\n1,2\n");
        assert!(e.contains("quoted field"), "{e}");
        let t = parse("a,b\n1,2\n", "d.csv", None).unwrap();
        let e = t.select("d.csv", "target", "c").unwrap_err().to_string();
        assert!(e.contains("columns are a, b"), "{e}");
    }
}
