//! Where the time of a data-parallel step goes: per-step durations of its
//! phases (local gradient and read-back, all-reduce, upload and update), kept
//! when `FERROFIT_PHASES` is set and summarised on stderr at the end of a run.
//! A diagnostic for stalls that a device trace would otherwise find.

use std::time::{Duration, Instant};

/// Phases of a data-parallel step, in order.
pub const PHASES: [&str; 3] = ["gradient + read-back", "all-reduce", "upload + update"];

/// Per-step phase durations of one replica (empty unless enabled).
pub struct Phases {
    on: bool,
    mark: Instant,
    times: [Vec<Duration>; 3],
}

impl Phases {
    /// Recording when the environment variable `FERROFIT_PHASES` is set.
    pub fn from_env() -> Phases {
        Phases {
            on: std::env::var_os("FERROFIT_PHASES").is_some(),
            mark: Instant::now(),
            times: Default::default(),
        }
    }

    /// Starts the clock of a step's first phase.
    pub fn start(&mut self) {
        if self.on {
            self.mark = Instant::now();
        }
    }

    /// Ends phase `i` (and starts the next).
    pub fn end(&mut self, i: usize) {
        if self.on {
            let now = Instant::now();
            self.times[i].push(now - self.mark);
            self.mark = now;
        }
    }

    /// One line a phase: median, maximum (and its step), total — or nothing.
    pub fn summary(&self, who: &str) -> Option<String> {
        if !self.on || self.times[0].is_empty() {
            return None;
        }
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let lines: Vec<String> = PHASES
            .iter()
            .zip(&self.times)
            .map(|(name, t)| {
                let mut sorted = t.clone();
                sorted.sort();
                let (at, max) = t
                    .iter()
                    .enumerate()
                    .max_by_key(|(_, d)| **d)
                    .map(|(i, d)| (i, *d))
                    .unwrap_or_default();
                format!(
                    "{who} {name}: p50 {:.3} ms, max {:.3} ms (step {at}), total {:.1} ms",
                    ms(sorted[sorted.len() / 2]),
                    ms(max),
                    ms(t.iter().sum())
                )
            })
            .collect();
        Some(lines.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summarises_each_phase_and_finds_the_longest_step() {
        let mut p = Phases {
            on: true,
            mark: Instant::now(),
            times: Default::default(),
        };
        for step in 0..3 {
            p.start();
            for i in 0..3 {
                if step == 1 && i == 1 {
                    std::thread::sleep(Duration::from_millis(20));
                }
                p.end(i);
            }
        }
        let s = p.summary("replica 0").unwrap();
        assert_eq!(s.lines().count(), 3);
        assert!(s.lines().nth(1).unwrap().contains("(step 1)"), "{s}");
        let off = Phases { on: false, ..p };
        assert!(off.summary("replica 0").is_none());
    }
}
