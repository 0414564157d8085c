//! `ferrofit doctor`'s checks catch what they claim to: each runs against a
//! fake device broken on purpose (an optimizer that does not update, a gradient
//! that is off, memory that runs out past a size) wrapped around every real
//! test device (cpu, lavapipe in CI), and passes on the honest device.

mod common;

use ferrofit::backend::select::Target;
use ferrofit::backend::Backend;
use ferrofit::config::{EngineKind, TrainConfig};
use ferrofit::doctor::{checks, Severity, Subject};
use ferrofit::model::Params;
use ferrofit::task::Dataset;
use ferrofit::trainer::RunResult;
use ferrofit::FerroError;

/// How a fake device is broken.
#[derive(Clone, Copy)]
enum Fault {
    /// The optimizer leaves the weights where they started.
    NoUpdate,
    /// Gradients come back 1 % too large.
    GradientOff,
    /// Anything above this many points fails to allocate.
    MemoryLimit(usize),
    /// Anything above this many points panics inside the backend.
    PanicsAbove(usize),
    /// Anything above this many points hits a bug in ferrofit's own code.
    BugAbove(usize),
}

struct Fake<'a> {
    real: &'a Target,
    fault: Fault,
}

impl Subject for Fake<'_> {
    fn backend(&self) -> Backend {
        self.real.backend
    }

    fn train_from(
        &self,
        cfg: &TrainConfig,
        engine: EngineKind,
        init: Params,
        data: Option<Dataset>,
    ) -> ferrofit::Result<RunResult> {
        match self.fault {
            Fault::MemoryLimit(max) if cfg.n > max => {
                return Err(FerroError::BackendFailed {
                    backend: "fake".into(),
                    detail: format!("out of memory allocating {} bytes", cfg.n * 8),
                })
            }
            Fault::PanicsAbove(max) if cfg.n > max => panic!("device lost"),
            Fault::BugAbove(max) if cfg.n > max => {
                return Err(FerroError::Bug {
                    detail: "index out of bounds".into(),
                    location: "src/engine/run.rs:1".into(),
                })
            }
            _ => {}
        }
        let mut r = self.real.train_from(cfg, engine, init.clone(), data)?;
        if let Fault::NoUpdate = self.fault {
            r.params = init;
        }
        Ok(r)
    }

    fn gradient(
        &self,
        cfg: &TrainConfig,
        p: &Params,
        data: &Dataset,
    ) -> ferrofit::Result<Vec<f32>> {
        let mut g = self.real.gradient(cfg, p, data)?;
        if let Fault::GradientOff = self.fault {
            g.iter_mut().for_each(|v| *v *= 1.01);
        }
        Ok(g)
    }
}

common::per_device! {
    fn honest_devices_pass(t) {
        for f in [
            checks::parameters_update(t),
            checks::gradients(t),
            checks::largest_n(t, 1 << 17),
        ] {
            assert_eq!(f.severity, Severity::Pass, "{}: {f:?}", t.label());
        }
    }
}

common::per_device! {
    fn a_device_that_drops_updates_fails_check_1(t) {
        let f = checks::parameters_update(&Fake {
            real: t,
            fault: Fault::NoUpdate,
        });
        assert_eq!(f.severity, Severity::Fail, "{}: {f:?}", t.label());
        assert!(f.detail.contains("layers.0"), "{f:?}");
    }
}

common::per_device! {
    fn a_device_with_an_off_gradient_fails_check_2(t) {
        let f = checks::gradients(&Fake {
            real: t,
            fault: Fault::GradientOff,
        });
        assert_eq!(f.severity, Severity::Fail, "{}: {f:?}", t.label());
        assert!(f.fix.as_deref().unwrap().contains("driver"), "{f:?}");
    }
}

#[test]
fn the_memory_probe_finds_the_limit_and_survives_a_panic() {
    let t = &common::cpu();
    let limit = 300_000;
    let probe = |fault| checks::largest_n(&Fake { real: t, fault }, 1 << 22);
    // A backend that fails or panics above a size: the limit is found.
    for fault in [Fault::MemoryLimit(limit), Fault::PanicsAbove(limit)] {
        let f = probe(fault);
        assert_eq!(f.severity, Severity::Warn, "{f:?}");
        let found: usize = f
            .detail
            .trim_start_matches("largest N that fits: ")
            .split(';')
            .next()
            .unwrap()
            .parse()
            .unwrap_or_else(|_| panic!("{f:?}"));
        assert!(
            found <= limit && found >= limit - limit / 16,
            "found {found} for a limit of {limit}"
        );
        assert!(f.fix.as_deref().unwrap().contains("--batch-size"), "{f:?}");
    }
    // A bug in ferrofit's own code is not taken for a size limit.
    let f = probe(Fault::BugAbove(limit));
    assert_eq!(f.severity, Severity::Fail, "{f:?}");
    assert!(f.detail.contains("not for lack of memory"), "{f:?}");
    assert!(!f.fix.as_deref().unwrap().contains("--batch-size"), "{f:?}");
    let f = checks::largest_n(
        &Fake {
            real: t,
            fault: Fault::MemoryLimit(10),
        },
        1 << 20,
    );
    assert_eq!(f.severity, Severity::Fail, "{f:?}");
}
