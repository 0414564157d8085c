//! The command line: `ferrofit devices`, `train`, `predict`, `bench`, `doctor`, `tune`
//! and `report`.

mod bench;
mod devices;
mod doctor;
mod predict;
mod progress;
mod report;
mod train;
mod tune;

use clap::{Parser, Subcommand};

/// Train small neural networks on any GPU or the CPU, and measure it.
#[derive(Parser, Debug)]
#[command(name = "ferrofit", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
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
}

/// Parses the process arguments and runs the command.
pub fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Devices(a) => devices::run(a),
        Command::Train(a) => train::run(*a),
        Command::Bench(a) => bench::run(*a),
        Command::Doctor(a) => doctor::run(a),
        Command::Tune(a) => tune::run(*a),
        Command::Predict(a) => predict::run(a),
        Command::Report(a) => report::run(a),
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
}
