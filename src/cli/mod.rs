//! The command line: `ferrofit devices`, `train`, `predict`, `bench`, `doctor`, `tune`,
//! `report`, `cache` and `completions`; `-q`/`-v` for every command, `--config FILE`
//! for those that take a job.

mod bench;
mod cache;
mod config_file;
mod devices;
mod doctor;
pub(crate) mod log;
mod predict;
mod progress;
mod report;
mod train;
mod tune;

use clap::{Parser, Subcommand};

/// Train small neural networks on any GPU or the CPU, and measure it.
#[derive(Parser, Debug)]
#[command(name = "ferrofit", version, about, args_override_self = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Say more: -v the libraries' info logs (Burn, CubeCL, wgpu), -vv debug, -vvv trace (RUST_LOG overrides).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Say only the result, warnings and errors: no progress, no notes.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
}

/// Subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// List every device this build can use.
    Devices(devices::DevicesArgs),
    /// Train an MLP (default: the seed job — y = x² + 0.3·U(0,1) on 1e6 points, 1-10-1 ReLU MLP, MSE, 100 SGD steps).
    Train(Box<train::TrainArgs>),
    /// Time a job on every backend (and optionally PyTorch/JAX), repeated, with statistics.
    Bench(Box<bench::BenchArgs>),
    /// Check every device for the usual GPU-training pitfalls (exit 1 when a check fails).
    Doctor(doctor::DoctorArgs),
    /// Run a saved model on new inputs (CSV or --x values).
    Predict(predict::PredictArgs),
    /// Write one self-contained HTML page from train/bench/doctor JSON records.
    Report(report::ReportArgs),
    /// Search for the fastest configuration that reaches the job's loss; cache it for `train --tuned`.
    Tune(Box<tune::TuneArgs>),
    /// Show where compiled GPU kernels are kept between runs, or clear them (--clear).
    Cache(cache::CacheArgs),
    /// Print a shell completion script: `ferrofit completions bash > ~/.local/share/bash-completion/completions/ferrofit`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// Parses the process arguments (with any `--config FILE` read in) and runs the command.
pub fn run() -> anyhow::Result<()> {
    let args = config_file::expand(std::env::args_os().collect())?;
    let cli = Cli::parse_from(args);
    log::init(cli.verbose, cli.quiet);
    match cli.command {
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "ferrofit", &mut std::io::stdout());
            Ok(())
        }
        Command::Devices(a) => devices::run(a),
        Command::Train(a) => train::run(*a),
        Command::Bench(a) => bench::run(*a),
        Command::Doctor(a) => doctor::run(a),
        Command::Tune(a) => tune::run(*a),
        Command::Predict(a) => predict::run(a),
        Command::Report(a) => report::run(a),
        Command::Cache(a) => cache::run(a),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every subcommand's flags are unique and well-formed (clap checks at parse
    /// time only for the subcommand used; this checks them all).
    #[test]
    fn every_command_line_is_consistent() {
        super::Cli::command().debug_assert();
    }

    /// `--help` describes every flag of every command.
    #[test]
    fn every_flag_is_described() {
        let cli = super::Cli::command();
        let mut bare = Vec::new();
        for cmd in cli.get_subcommands() {
            for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
                let id = arg.get_id().as_str();
                if arg.get_help().is_none() && !matches!(id, "help" | "version") {
                    bare.push(format!("{} --{id}", cmd.get_name()));
                }
            }
        }
        assert!(bare.is_empty(), "flags without a description: {bare:?}");
    }
}
