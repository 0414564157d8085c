//! What every fuzz target asserts, one function per target, shared by the
//! targets (`fuzz_targets/`) and the corpus replay test
//! (`crates/ferrofit-spec/tests/fuzz_corpus.rs`), so an input the fuzzer kept
//! is checked the same way in CI. Each returns whether the input was accepted
//! (refusals are fine; panics and broken invariants are not).

use clap::Parser;
use ferrofit_spec::args::{DataArgs, JobArgs};
use ferrofit_spec::columns::MissingPolicy;
use ferrofit_spec::config::CsvSpec;
use ferrofit_spec::config::TrainConfig;
use ferrofit_spec::csv;
use ferrofit_spec::files::{self, checkpoint, model};
use ferrofit_spec::userdata;

/// The CSV reader and the column encodings: a rectangular table whose
/// selected columns become finite model inputs of the stated width, or a
/// refusal naming the file (or the flag).
pub fn csv(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let mut accepted = false;
    for delimiter in [None, Some(','), Some(';')] {
        match csv::parse(text, "fuzz.csv", delimiter) {
            Ok(t) => {
                accepted = true;
                assert_eq!(t.lines.len(), t.rows());
                let last = t.columns - 1;
                for r in 0..t.rows() {
                    for c in 0..t.columns {
                        let _ = t.cell(r, c);
                    }
                }
                for missing in [MissingPolicy::Error, MissingPolicy::Drop] {
                    let spec = CsvSpec {
                        path: "fuzz.csv".into(),
                        inputs: "0".into(),
                        targets: last.to_string(),
                        val_split: 0.25,
                        missing,
                        ..CsvSpec::default()
                    };
                    match userdata::from_table(&t, &spec, 1) {
                        Ok(d) => {
                            let width = d.norm.input_width();
                            assert_eq!(d.train.x.len(), d.train.len() * width);
                            assert_eq!(d.train.y.len(), d.train.len());
                            assert!(d.train.len() + d.dropped <= t.rows());
                            assert!(d.train.x.iter().chain(&d.train.y).all(|v| v.is_finite()));
                        }
                        Err(e) => {
                            let e = e.to_string();
                            assert!(
                                e.starts_with("fuzz.csv") || e.starts_with("invalid --"),
                                "{e}"
                            );
                        }
                    }
                }
            }
            Err(e) => assert!(e.to_string().starts_with("fuzz.csv"), "{e}"),
        }
    }
    accepted
}

#[derive(Parser, Debug)]
struct Cli {
    #[command(flatten)]
    job: JobArgs,
    #[command(flatten)]
    data: DataArgs,
}

/// The command-line job knobs (one argument a line): a parse error, a
/// validation error, or a configuration that validates and survives a JSON
/// round trip.
pub fn args(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let args = std::iter::once("ferrofit").chain(text.split('\n'));
    let Ok(cli) = Cli::try_parse_from(args) else {
        return false;
    };
    let mut cfg = cli.job.config();
    cli.data.apply(&mut cfg);
    if cfg.validate().is_err() {
        return false;
    }
    let _ = cfg.points_per_step();
    let json = serde_json::to_string(&cfg).expect("a valid config serialises");
    let back: TrainConfig = serde_json::from_str(&json).expect("and reads back");
    assert_eq!(back, cfg);
    true
}

/// The model-file decoder: a chain of finite layers whose sizes match, with a
/// standardisation (if any) that fits them, re-encoding to the same weights.
pub fn model(data: &[u8]) -> bool {
    let Ok(m) = model::decode(data) else {
        return false;
    };
    let layers = &m.params.layers;
    assert!(!layers.is_empty());
    for l in layers {
        assert_eq!((l.w.len(), l.b.len()), (l.fan_in * l.fan_out, l.fan_out));
        assert!(l.w.iter().chain(&l.b).all(|v| v.is_finite()));
    }
    for w in layers.windows(2) {
        assert_eq!(w[0].fan_out, w[1].fan_in);
    }
    if let Some(n) = &m.normalization {
        assert_eq!(n.x_std.len(), layers[0].fan_in);
        assert!(n.y_std.iter().all(|s| *s > 0.0));
    }
    let again = files::serialize(&model::tensors(&m.params), Default::default()).unwrap();
    assert_eq!(model::decode_params(&again).unwrap(), m.params);
    true
}

/// The checkpoint decoder: finite state that fits its own valid
/// configuration and re-encodes to itself.
pub fn checkpoint(data: &[u8]) -> bool {
    let Ok(c) = checkpoint::decode(data) else {
        return false;
    };
    assert!(c.config.validate().is_ok());
    assert!(c.step >= 1 && c.step <= c.config.steps);
    let n = c.params.len();
    assert_eq!(n, c.config.model.parameter_count());
    for v in [&c.opt.m, &c.opt.v] {
        assert!(v.is_empty() || v.len() == n);
        assert!(v.iter().all(|x| x.is_finite()));
    }
    let again = checkpoint::encode(&c).expect("finite state encodes");
    assert_eq!(checkpoint::decode(&again).unwrap(), c);
    true
}
