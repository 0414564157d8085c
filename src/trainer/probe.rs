//! How large a full batch a device takes: one-step runs at doubling N until
//! one fails, then bisection to within 1/16. Used by `doctor` (its largest-N
//! check) and by `train`, which turns a failure at a large N into the advice
//! of the largest N that fits. Before any of that, [`host_memory`] refuses a
//! job whose data cannot fit this machine's memory at all (the allocation
//! would abort the process instead of failing).

use super::Trainer;
use crate::backend::select::Target;
use crate::config::TrainConfig;

/// Ok when the job's data (inputs and targets, f32) fits in this machine's
/// physical memory; else the error naming `--n`. Unknown memory passes.
pub fn host_memory(cfg: &TrainConfig) -> crate::Result<()> {
    let per_point = 4 * (cfg.model.inputs + cfg.model.outputs);
    let need = cfg.n.saturating_mul(per_point);
    match physical_memory() {
        Some(have) if need > have => Err(crate::FerroError::arg(
            "n",
            cfg.n,
            format!(
                "{} points need {:.1} GiB for their data and this machine has {:.1} GiB: \
                 use at most about {} points",
                cfg.n,
                need as f64 / GIB,
                have as f64 / GIB,
                have / 2 / per_point
            ),
        )),
        _ => Ok(()),
    }
}

const GIB: f64 = (1u64 << 30) as f64;

/// Bytes of physical memory, where the system says.
#[cfg(not(unix))]
fn physical_memory() -> Option<usize> {
    None
}

/// Bytes of physical memory, where the system says.
#[cfg(unix)]
fn physical_memory() -> Option<usize> {
    // SAFETY: sysconf only reads system configuration.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages > 0 && size > 0).then(|| (pages as usize).saturating_mul(size as usize))
}

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
    /// Whether that failure can be a size limit: any backend failure or
    /// backend panic, not a bug in ferrofit's own code (which says nothing
    /// about what fits).
    pub size_limit: bool,
}

/// Doubles N from 2^16 up to `max_n` until a one-step run fails, then halves
/// the gap to 1/16 — unless the failure is a bug in ferrofit's own code. `None` when every
/// N up to `max_n` ran. Failures and panics come back as values, never a crash.
pub fn limit(
    base: &TrainConfig,
    max_n: usize,
    run: impl Fn(&TrainConfig) -> crate::Result<()>,
) -> Option<Limit> {
    // Err((message, whether it can be a size limit)).
    let fits = |n: usize| -> Result<(), (String, bool)> {
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
        // A backend that panics at a size instead of returning an error
        // (wgpu on an oversized buffer) counts as "does not fit".
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&cfg))) {
            Ok(r) => r.map_err(|e| {
                let bug = matches!(e, crate::FerroError::Bug { .. });
                (e.to_string(), !bug)
            }),
            Err(_) => Err(("the backend panicked".into(), true)),
        }
    };
    let mut ok = 0usize;
    let mut n = PROBE_START.min(max_n.max(1));
    let (mut bad, (why, size_limit)) = loop {
        match fits(n) {
            Ok(()) => ok = n,
            Err(e) => break (n, e),
        }
        if n >= max_n {
            return None;
        }
        n = (n * 2).min(max_n);
    };
    while size_limit && ok > 0 && bad - ok > ok / 16 {
        let mid = ok + (bad - ok) / 2;
        match fits(mid) {
            Ok(()) => ok = mid,
            Err((_, true)) => bad = mid,
            Err(_) => break,
        }
    }
    Some(Limit {
        fits: ok,
        fails: bad,
        why,
        size_limit,
    })
}

/// The largest N of `cfg`'s job that one step runs with on `target`, up to `cfg.n`.
pub fn on_target(target: &Target, cfg: &TrainConfig) -> Option<Limit> {
    limit(cfg, cfg.n, |c| {
        Trainer::new(c.clone(), target.clone()).run().map(|_| ())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_larger_than_the_machine_is_refused_before_any_allocation() {
        let mut cfg = TrainConfig::default();
        cfg.model.inputs = 16;
        cfg.model.outputs = 16;
        cfg.n = crate::config::MAX_POINTS;
        // 2^31 points of 32 values: 256 GiB of data.
        let need = cfg.n * 32 * 4;
        match physical_memory() {
            Some(have) if have < need => {
                let err = host_memory(&cfg).expect_err("more data than memory");
                assert!(err.to_string().contains("--n"), "{err}");
            }
            _ => assert!(host_memory(&cfg).is_ok()),
        }
        assert!(host_memory(&TrainConfig::default()).is_ok());
    }
}
