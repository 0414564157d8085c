//! The checks themselves, each small, each on one device.

use super::{Finding, Severity, Subject};
use crate::backend::Backend;
use crate::bench::stats::{fmt_time, Summary};
use crate::config::{EngineKind, OptimizerKind, Precision, TrainConfig};
use crate::model::{reference, Params};
use crate::task::Task;
use crate::trainer::probe::{self, Limit};
use crate::trainer::RunResult;

/// Coefficient of variation of per-step latency above which jitter is flagged.
pub const JITTER_CV: f64 = 0.25;

/// Runs every check on `target`; `lr` is the learning rate the user intends
/// to use, `max_n` the largest N the memory probe tries.
pub fn all(target: &dyn Subject, lr: Option<f64>, max_n: usize) -> Vec<Finding> {
    let mut out = vec![
        parameters_update(target),
        gradients(target),
        loss_falls(target, None),
    ];
    if let Some(lr) = lr {
        out.push(loss_falls(target, Some(lr)));
    }
    out.push(largest_n(target, max_n));
    out.push(jitter(target));
    out.push(half_precision(target));
    out
}

/// Trains `cfg` from its seeded initial weights.
fn run(t: &dyn Subject, cfg: &TrainConfig) -> crate::Result<RunResult> {
    t.train_from(
        cfg,
        EngineKind::Auto,
        Params::init(&cfg.model, cfg.seed),
        None,
    )
}

fn small() -> TrainConfig {
    TrainConfig {
        n: 4096,
        steps: 20,
        run: crate::config::RunControl {
            log_every: 1,
            ..Default::default()
        },
        ..TrainConfig::default()
    }
}

fn fail(check: &'static str, e: impl std::fmt::Display) -> Finding {
    Finding::bad(
        check,
        Severity::Fail,
        format!("could not run: {e}"),
        "run `ferrofit devices` and check the driver",
    )
}

/// Pitfall 1: with an optimizer created once, every parameter tensor moves.
pub fn parameters_update(t: &dyn Subject) -> Finding {
    const CHECK: &str = "parameters update";
    let cfg = small();
    let init = Params::init(&cfg.model, cfg.seed);
    let mut stuck = Vec::new();
    for engine in [EngineKind::General, EngineKind::Auto] {
        let r = match t.train_from(
            &cfg,
            engine,
            init.clone(),
            Some(Task::X2Noise.generate(cfg.n, cfg.seed)),
        ) {
            Ok(r) => r,
            Err(e) => return fail(CHECK, e),
        };
        for (i, (a, b)) in init.layers.iter().zip(&r.params.layers).enumerate() {
            if a.w == b.w || a.b == b.b {
                stuck.push(format!("{:?} engine layers.{i}", r.engine));
            }
        }
    }
    if stuck.is_empty() {
        Finding::pass(
            CHECK,
            "every tensor moved after 20 steps (general and auto engines)".into(),
        )
    } else {
        Finding::bad(
            CHECK,
            Severity::Fail,
            format!("unchanged: {}", stuck.join(", ")),
            "this backend drops updates: use another --backend and report the driver",
        )
    }
}

/// Pitfall 2 (silent miscompiles): the gradient equals the float64 reference.
pub fn gradients(t: &dyn Subject) -> Finding {
    const CHECK: &str = "gradients";
    let cfg = TrainConfig {
        n: 1000,
        ..TrainConfig::default()
    };
    let p = Params::init(&cfg.model, 3);
    let data = Task::Sin.generate(cfg.n, 3);
    let (_, want) = reference::loss_and_grad(&p, &data, cfg.model.activation, cfg.loss);
    let got = match t.gradient(&cfg, &p, &data) {
        Ok(g) => g,
        Err(e) => return fail(CHECK, e),
    };
    let err = reference::relative_error(&got, &want);
    let tol = if t.backend() == Backend::Cuda {
        1e-3
    } else {
        1e-4
    };
    if err <= tol {
        Finding::pass(
            CHECK,
            format!("relative error {err:.1e} vs float64 (tolerance {tol:.0e})"),
        )
    } else {
        Finding::bad(
            CHECK,
            Severity::Fail,
            format!("relative error {err:.1e} vs float64 (tolerance {tol:.0e})"),
            "the backend computes wrong gradients: update the driver or use another --backend",
        )
    }
}

/// Pitfall 3: the loss falls with the default (or the user's) learning rate.
pub fn loss_falls(t: &dyn Subject, lr: Option<f64>) -> Finding {
    let check = if lr.is_some() {
        "loss falls (your --lr)"
    } else {
        "loss falls (default lr)"
    };
    let cfg = TrainConfig {
        n: 20_000,
        steps: 50,
        lr: lr.unwrap_or(0.2),
        ..small()
    };
    match run(t, &cfg) {
        Ok(r) => {
            let (first, last) = (r.outcome.curve[0].loss, r.outcome.final_loss);
            if last.is_finite() && last < 0.9 * first {
                Finding::pass(
                    check,
                    format!("lr {}: {first:.4} -> {last:.4} in 50 steps", cfg.lr),
                )
            } else {
                Finding::bad(
                    check,
                    Severity::Fail,
                    format!("lr {}: {first:.4} -> {last:.4} in 50 steps", cfg.lr),
                    "lower --lr (try 1/2 to 1/5), or use --optimizer adam",
                )
            }
        }
        Err(e) => Finding::bad(
            check,
            Severity::Fail,
            e.to_string(),
            "lower --lr, or use --optimizer adam",
        ),
    }
}

/// The report's jitter: per-step latency over 200 synchronised steps.
pub fn jitter(t: &dyn Subject) -> Finding {
    const CHECK: &str = "jitter";
    let cfg = TrainConfig {
        n: 100_000,
        steps: 201,
        ..small()
    };
    let r = match run(t, &cfg) {
        Ok(r) => r,
        Err(e) => return fail(CHECK, e),
    };
    let steps: Vec<f64> = r
        .outcome
        .curve
        .windows(2)
        .map(|w| w[1].seconds - w[0].seconds)
        .collect();
    let s = Summary::of(&steps);
    let detail = format!(
        "{} steps: p50 {}, p99 {}, CV {:.0}%",
        s.runs,
        fmt_time(s.median),
        fmt_time(s.p99),
        s.cv * 100.0
    );
    if s.cv <= JITTER_CV {
        Finding::pass(CHECK, detail)
    } else {
        Finding::bad(CHECK, Severity::Warn, detail, "step times vary: set a performance power plan, close other GPU users, let clocks ramp up (warm up), and compare with `ferrofit bench --reps 10`")
    }
}

/// Pitfall 6: f16 stays stable (dynamic loss scaling; bf16 for comparison).
pub fn half_precision(t: &dyn Subject) -> Finding {
    const CHECK: &str = "f16 / bf16";
    let mut parts = Vec::new();
    let mut bad = false;
    for precision in [Precision::F16, Precision::Bf16] {
        let cfg = TrainConfig {
            n: 4096,
            steps: 40,
            precision,
            optimizer: OptimizerKind::Adam,
            lr: 0.02,
            ..small()
        };
        match run(t, &cfg) {
            Ok(r) => {
                let (first, last) = (r.outcome.curve[0].loss, r.outcome.final_loss);
                bad |= !(last.is_finite() && last < 0.5 * first);
                parts.push(format!(
                    "{precision:?}: {first:.4} -> {last:.4}, {} steps skipped by loss scaling",
                    r.outcome.skipped_steps
                ));
            }
            Err(e) => {
                bad = true;
                parts.push(format!("{precision:?}: {e}"));
            }
        }
    }
    parts.push(tensor_cores(t));
    if bad {
        Finding::bad(
            CHECK,
            Severity::Warn,
            parts.join("; "),
            "use --precision f32 on this device (or the half precision that trained above)",
        )
    } else {
        Finding::pass(CHECK, parts.join("; "))
    }
}

/// [`probe::limit`] on a [`Subject`]: one-step runs of `base` at growing N.
pub fn probe_limit(t: &dyn Subject, base: &TrainConfig, max_n: usize) -> Option<Limit> {
    probe::limit(base, max_n, |cfg| run(t, cfg).map(|_| ()))
}

/// Pitfall 4 (large batches crash): the largest full batch one step runs on,
/// found by doubling N up to `max_n`, then halving the gap to the first
/// failure. Allocation failures and backend panics come back as errors, so
/// the probe never takes the process down.
pub fn largest_n(t: &dyn Subject, max_n: usize) -> Finding {
    const CHECK: &str = "largest N";
    let Some(Limit {
        fits: ok,
        fails: bad,
        why,
        size_limit,
    }) = probe_limit(t, &small(), max_n)
    else {
        return Finding::pass(
            CHECK,
            format!("one full-batch step fits at every N tried, up to {max_n} (the probe's cap; raise it with --max-n)"),
        );
    };
    let why: String = why.chars().take(160).collect();
    if !size_limit {
        return Finding::bad(
            CHECK,
            Severity::Fail,
            format!("N = {bad} failed, and not for lack of memory: {why}"),
            "a bug in ferrofit, not a size limit: please report it with this message",
        );
    }
    if ok == 0 {
        return Finding::bad(
            CHECK,
            Severity::Fail,
            format!("even N = {bad} failed: {why}"),
            "this device cannot hold the smallest probe: use --backend cpu",
        );
    }
    Finding::bad(
        CHECK,
        Severity::Warn,
        format!("largest N that fits: {ok}; N = {bad} failed: {why}"),
        &format!("train larger data sets as mini-batches: --batch-size {ok} (or less) with --accumulate K for an effective batch of K × that"),
    )
}

/// Whether a deep model in bf16 runs on the tensor cores here (the fused
/// engine's tensor-core kernel), or why not.
fn tensor_cores(t: &dyn Subject) -> String {
    let cfg = TrainConfig {
        model: crate::config::ModelSpec {
            hidden: 64,
            layers: 3,
            ..small().model
        },
        n: 4096,
        steps: 5,
        precision: Precision::Bf16,
        ..small()
    };
    let init = Params::init(&cfg.model, cfg.seed);
    match t.train_from(&cfg, EngineKind::Auto, init, None) {
        Ok(r) => {
            // Elsewhere the fused engine emulates half precision (its note says so).
            let note = r.engine_note.unwrap_or_else(|| "general engine".into());
            let used = if r.tensor_cores { "used" } else { "not used" };
            format!("tensor cores: {used} ({note})")
        }
        Err(e) => format!("tensor cores: a deep bf16 run failed: {e}"),
    }
}
