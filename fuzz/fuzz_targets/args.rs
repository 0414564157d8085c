//! The command-line job knobs and the configuration they make: any argument
//! list either fails to parse, fails validation with an error, or gives a
//! configuration that validates and survives a JSON round trip. Never a panic.
#![no_main]

use clap::Parser;
use ferrofit_spec::args::{DataArgs, JobArgs};
use ferrofit_spec::config::TrainConfig;
use libfuzzer_sys::fuzz_target;

#[derive(Parser, Debug)]
struct Cli {
    #[command(flatten)]
    job: JobArgs,
    #[command(flatten)]
    data: DataArgs,
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let args = std::iter::once("ferrofit").chain(text.split('\n'));
    let Ok(cli) = Cli::try_parse_from(args) else {
        return;
    };
    let mut cfg = cli.job.config();
    cli.data.apply(&mut cfg);
    if cfg.validate().is_ok() {
        let _ = cfg.points_per_step();
        let json = serde_json::to_string(&cfg).expect("a valid config serialises");
        let back: TrainConfig = serde_json::from_str(&json).expect("and reads back");
        assert_eq!(back, cfg);
    }
});
