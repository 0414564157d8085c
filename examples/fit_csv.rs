//! Fit the last column of a CSV file of numbers from the others:
//! `cargo run --example fit_csv -- data.csv`. (The CLI's `train --csv` does
//! more: names, text columns, missing cells; this shows the library calls.)

use ferrofit::fit::{fit, Options};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: fit_csv FILE.csv")?;
    let table = ferrofit::csv::read(std::path::Path::new(&path), None)?;
    let inputs = table
        .columns
        .checked_sub(1)
        .filter(|&k| k > 0)
        .ok_or("need two columns or more")?;
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for r in 0..table.rows() {
        for c in 0..table.columns {
            let v: f32 = table
                .cell(r, c)
                .parse()
                .map_err(|_| format!("line {}: not a number", table.lines[r]))?;
            if c < inputs {
                x.push(v)
            } else {
                y.push(v)
            }
        }
    }
    let model = fit(
        &x,
        &y,
        inputs,
        1,
        &Options {
            val_split: 0.1,
            ..Options::default()
        },
    )?;
    let record = model
        .record
        .as_ref()
        .expect("a fitted model has its record");
    println!(
        "{} rows, {} inputs: training loss {:.5}, validation loss {:.5} (standardised units) on {}",
        table.rows(),
        inputs,
        record.final_loss,
        record.validation_loss.unwrap_or(f64::NAN),
        record.backend
    );
    Ok(())
}
