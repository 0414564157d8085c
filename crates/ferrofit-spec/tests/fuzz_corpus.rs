//! Replays the fuzz corpus (`fuzz/corpus/`) through the same checks as the
//! fuzz targets, so every input the fuzzer kept is a regression test here.

use clap::Parser;
use ferrofit_spec::args::{DataArgs, JobArgs};
use ferrofit_spec::config::TrainConfig;
use ferrofit_spec::csv;
use std::path::Path;

fn corpus(name: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(name);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

#[test]
fn every_csv_corpus_input_parses_or_is_refused_cleanly() {
    let inputs = corpus("csv");
    assert!(inputs.len() > 3, "the corpus is in the repo");
    let mut accepted = 0;
    for data in inputs {
        let Ok(text) = std::str::from_utf8(&data) else {
            continue;
        };
        for delimiter in [None, Some(','), Some(';')] {
            match csv::parse(text, "corpus.csv", delimiter) {
                Ok(t) => {
                    accepted += 1;
                    assert_eq!(t.values.len(), t.rows() * t.columns);
                    assert!(t.values.iter().all(|v| v.is_finite()));
                }
                Err(e) => assert!(e.to_string().starts_with("corpus.csv"), "{e}"),
            }
        }
    }
    assert!(accepted > 0);
}

#[derive(Parser, Debug)]
struct Cli {
    #[command(flatten)]
    job: JobArgs,
    #[command(flatten)]
    data: DataArgs,
}

#[test]
fn every_args_corpus_input_parses_validates_and_round_trips_or_is_refused() {
    for data in corpus("args") {
        let Ok(text) = std::str::from_utf8(&data) else {
            continue;
        };
        let args = std::iter::once("ferrofit").chain(text.split('\n'));
        let Ok(cli) = Cli::try_parse_from(args) else {
            continue;
        };
        let mut cfg = cli.job.config();
        cli.data.apply(&mut cfg);
        if cfg.validate().is_ok() {
            let json = serde_json::to_string(&cfg).unwrap();
            let back: TrainConfig = serde_json::from_str(&json).unwrap();
            assert_eq!(back, cfg);
        }
    }
}
