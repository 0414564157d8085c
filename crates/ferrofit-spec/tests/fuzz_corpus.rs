//! Replays the fuzz corpus (`fuzz/corpus/`) through the fuzz targets' own
//! checks (`fuzz/checks.rs`), so every input the fuzzer kept is a regression
//! test here. Each corpus must hold inputs that are accepted, not only
//! refusals, or the checks behind acceptance would go untested.

#[path = "../../../fuzz/checks.rs"]
mod checks;

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

fn replay(name: &str, check: fn(&[u8]) -> bool) {
    let inputs = corpus(name);
    assert!(inputs.len() > 1, "the {name} corpus is in the repo");
    let accepted = inputs.iter().filter(|d| check(d)).count();
    assert!(accepted > 0, "no {name} corpus input is accepted");
}

#[test]
fn every_csv_corpus_input_parses_or_is_refused_cleanly() {
    replay("csv", checks::csv);
}

#[test]
fn every_args_corpus_input_parses_validates_and_round_trips_or_is_refused() {
    replay("args", checks::args);
}

#[test]
fn every_model_corpus_input_decodes_checked_or_is_refused() {
    replay("model", checks::model);
}

#[test]
fn every_checkpoint_corpus_input_decodes_checked_or_is_refused() {
    replay("checkpoint", checks::checkpoint);
}
