//! `ferrofit report FILE.json... [-o report.html]`.

use clap::Args;
use ferrofit::io::write_atomic;
use ferrofit::report::html::{self, Record};
use std::path::PathBuf;

/// Arguments of `report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// `train` run records (run.json), `bench --export-json` and `doctor --json` outputs.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// The HTML page to write.
    #[arg(short, long, default_value = "report.html")]
    output: PathBuf,
}

/// Runs `report`.
pub fn run(a: ReportArgs) -> anyhow::Result<()> {
    let mut records: Vec<(String, Record)> = Vec::new();
    for p in &a.files {
        let origin = p.display().to_string();
        let text = std::fs::read_to_string(p).map_err(|source| ferrofit::FerroError::Io {
            action: "reading",
            path: origin.clone(),
            source,
        })?;
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| ferrofit::FerroError::File {
            path: origin.clone(),
            detail: format!("not JSON ({e}); pass the files that `train --out`, `bench --export-json` and `doctor --json` write"),
        })?;
        records.push((origin.clone(), html::classify(v, &origin)?));
    }
    // A run.json sits beside its model.safetensors: use it for the fitted-function chart.
    let page = html::page(&records, |origin| {
        let dir = std::path::Path::new(origin).parent()?.to_path_buf();
        dir.join("model.safetensors").exists().then_some(dir)
    });
    write_atomic(&a.output, page.as_bytes())?;
    println!("wrote {}", a.output.display());
    Ok(())
}
