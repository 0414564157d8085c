//! The checks themselves, each small, each on one device.

use super::{Finding, Severity};
use crate::backend::dispatch::{self, general_gradient};
use crate::backend::select::Target;
use crate::backend::BackendKind;
use crate::batches::Batch;
use crate::bench::stats::{fmt_time, Summary};
use crate::config::{EngineKind, OptimizerKind, Precision, TrainConfig};
use crate::model::{reference, Params};
use crate::task::Task;

/// Coefficient of variation of per-step latency above which jitter is flagged.
pub const JITTER_CV: f64 = 0.25;

/// Runs every check on `target`; `lr` is the learning rate the user intends to use.
pub fn all(target: &Target, lr: Option<f64>) -> Vec<Finding> {
    let mut out = vec![
        parameters_update(target),
        gradients(target),
        loss_falls(target, None),
    ];
    if let Some(lr) = lr {
        out.push(loss_falls(target, Some(lr)));
    }
    out.push(jitter(target));
    out.push(half_precision(target));
    out
}

fn small() -> TrainConfig {
    TrainConfig {
        n: 4096,
        steps: 20,
        log_every: 1,
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
pub fn parameters_update(t: &Target) -> Finding {
    const CHECK: &str = "parameters update";
    let cfg = small();
    let init = Params::init(&cfg.model, cfg.seed);
    let mut stuck = Vec::new();
    for engine in [EngineKind::General, EngineKind::Auto] {
        let r = match dispatch::train_from(
            t,
            &cfg,
            engine,
            init.clone(),
            Some(Task::X2Noise.generate(cfg.n, cfg.seed)),
            &mut (),
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
pub fn gradients(t: &Target) -> Finding {
    const CHECK: &str = "gradients";
    let cfg = TrainConfig {
        n: 1000,
        ..TrainConfig::default()
    };
    let p = Params::init(&cfg.model, 3);
    let data = Task::Sin.generate(cfg.n, 3);
    let (_, want) = reference::loss_and_grad(&p, &data, cfg.model.activation, cfg.loss);
    let got = match general_gradient(t, &cfg, &p, &data, &Batch::Range(0, cfg.n)) {
        Ok(g) => g,
        Err(e) => return fail(CHECK, e),
    };
    let err = reference::relative_error(&got, &want);
    let tol = if t.kind == BackendKind::Cuda {
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
pub fn loss_falls(t: &Target, lr: Option<f64>) -> Finding {
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
    match dispatch::train(t, &cfg, EngineKind::Auto, &mut ()) {
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
pub fn jitter(t: &Target) -> Finding {
    const CHECK: &str = "jitter";
    let cfg = TrainConfig {
        n: 100_000,
        steps: 201,
        ..small()
    };
    let r = match dispatch::train(t, &cfg, EngineKind::Auto, &mut ()) {
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
pub fn half_precision(t: &Target) -> Finding {
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
        match dispatch::train(t, &cfg, EngineKind::Auto, &mut ()) {
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
