//! Progress display: a bar on a terminal, plain lines otherwise, nothing with `--json`.

use ferrofit::engine::run::Progress;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

/// Shows training progress on stderr.
pub enum Display {
    Bar(ProgressBar),
    Lines { every: usize, total: usize },
    Quiet,
}

impl Display {
    /// A bar on a terminal, lines every ~10% otherwise, or nothing when `quiet`.
    pub fn new(total: usize, quiet: bool) -> Self {
        if quiet {
            Display::Quiet
        } else if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(total as u64);
            bar.set_style(
                ProgressStyle::with_template(
                    "{bar:40.cyan/blue} {pos}/{len} steps  {msg}  [{elapsed_precise}, {per_sec}]",
                )
                .expect("valid template"),
            );
            Display::Bar(bar)
        } else {
            Display::Lines {
                every: total.div_ceil(10).max(1),
                total,
            }
        }
    }

    /// Clears the bar.
    pub fn finish(&self) {
        if let Display::Bar(b) = self {
            b.finish_and_clear();
        }
    }
}

impl Progress for Display {
    fn update(&mut self, step: usize, loss: Option<f64>) {
        match self {
            Display::Bar(b) => {
                b.set_position(step as u64 + 1);
                if let Some(l) = loss {
                    b.set_message(format!("loss {l:.5}"));
                }
            }
            Display::Lines { every, total } => {
                if let Some(l) = loss {
                    if (step + 1).is_multiple_of(*every) || step + 1 == *total {
                        eprintln!("step {:>6}/{total}  loss {l:.6}", step + 1);
                    }
                }
            }
            Display::Quiet => {}
        }
    }
}
