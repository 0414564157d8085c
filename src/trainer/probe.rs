//! How large a full batch a device takes: one-step runs at doubling N until
//! one fails, then bisection to within 1/16. Used by `doctor` (its largest-N
//! check) and by `train`, which turns a failure at a large N into the advice
//! of the largest N that fits.

use super::Trainer;
use crate::backend::select::Target;
use crate::config::TrainConfig;

/// Smallest N the memory probe starts from.
const PROBE_START: usize = 1 << 16;

/// Where one full-batch step stops fitting.
#[derive(Clone, Debug)]
pub struct Limit {
    /// Largest N that ran (0: none did).
    pub fits: usize,
    /// Smallest N seen to fail.
    pub fails: usize,
    /// The failure's message.
    pub why: String,
}

/// Doubles N from 2^16 up to `max_n` until a one-step run fails, then halves
/// the gap to 1/16. `None` when every N up to `max_n` ran. Allocation
/// failures and backend panics come back as errors, never a crash.
pub fn limit(
    base: &TrainConfig,
    max_n: usize,
    run: impl Fn(&TrainConfig) -> crate::Result<()>,
) -> Option<Limit> {
    let fits = |n: usize| -> Result<(), String> {
        let cfg = TrainConfig {
            n,
            steps: 1,
            batch_size: None,
            accumulate: 1,
            run: crate::config::RunControl {
                log_every: 1,
                checkpoint_every: None,
                ..base.run.clone()
            },
            ..base.clone()
        };
        // A backend that panics instead of returning an error counts as "does not fit".
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&cfg))) {
            Ok(r) => r.map_err(|e| e.to_string()),
            Err(_) => Err("the backend panicked".into()),
        }
    };
    let mut ok = 0usize;
    let mut n = PROBE_START.min(max_n.max(1));
    let (mut bad, why) = loop {
        match fits(n) {
            Ok(()) => ok = n,
            Err(e) => break (n, e),
        }
        if n >= max_n {
            return None;
        }
        n = (n * 2).min(max_n);
    };
    while ok > 0 && bad - ok > ok / 16 {
        let mid = ok + (bad - ok) / 2;
        match fits(mid) {
            Ok(()) => ok = mid,
            Err(_) => bad = mid,
        }
    }
    Some(Limit {
        fits: ok,
        fails: bad,
        why,
    })
}

/// The largest N of `cfg`'s job that one step runs with on `target`, up to `cfg.n`.
pub fn on_target(target: &Target, cfg: &TrainConfig) -> Option<Limit> {
    limit(cfg, cfg.n, |c| {
        Trainer::new(c.clone(), target.clone()).run().map(|_| ())
    })
}
