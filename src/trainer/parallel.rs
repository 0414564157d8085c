//! Data parallelism on the fused engine: one replica per device, each in its
//! own thread with the whole data set on its device. Every optimizer step
//! splits each micro-batch into one contiguous shard per replica; each replica
//! accumulates its shard's gradient (already divided by the step's full point
//! count), the replicas all-reduce (sum) gradient and loss through
//! `burn-collective`, and each applies the same update — so the weights stay
//! identical across replicas and equal, up to summation order, to a
//! single-device run. With a checkpoint folder, replica 0 writes the
//! checkpoints (every replica holds the same state) and the replicas agree
//! through the same all-reduce on stopping (Ctrl-C) and on a failed write, so
//! none is left waiting for a peer that has gone.

use super::phases::Phases;
use crate::backend::collective;
use crate::backend::select::Target;
use crate::batches::{Batch, BatchPlan};
use crate::config::TrainConfig;
use crate::engine::checkpoint::OptState;
use crate::engine::run::{self, Control, LossPoint, Progress, TrainOutcome};
use crate::engine::FlatEngine;
use crate::error::{FerroError, Result};
use crate::model::Params;
use crate::schedule::lr_at;
use crate::task::Dataset;
use std::sync::Mutex;
use std::time::Instant;

/// Points of the untimed gradient that compiles a replica's kernels.
const WARM_POINTS: usize = 1024;

/// One collective session at a time per process (burn-collective's local
/// server is global per backend).
static SESSION: Mutex<()> = Mutex::new(());

/// Shard `r` of `d` of a batch: a contiguous part, sizes differing by at most one.
pub fn shard(b: &Batch, r: usize, d: usize) -> Batch {
    let n = b.len();
    let (lo, hi) = (n * r / d, n * (r + 1) / d);
    match b {
        Batch::Range(s, _) => Batch::Range(s + lo, s + hi),
        Batch::Indices(ix) => Batch::Indices(ix[lo..hi].to_vec()),
    }
}

/// What every replica of one run shares.
pub struct Shared<'a> {
    /// The job.
    pub cfg: &'a TrainConfig,
    /// Where it starts and keeps checkpoints.
    pub ctl: &'a Control,
    /// A checkpoint's optimizer state to start from.
    pub opt: Option<&'a OptState>,
}

/// Trains `plan.cfg` from `init` on `data` with one replica per target (a
/// target may repeat: two peers on one device), from `plan.ctl.start_step`,
/// writing checkpoints into `plan.ctl.checkpoints`. Returns the outcome and
/// the weights of replica 0 (all replicas hold the same).
pub(super) fn train(
    plan: &Shared,
    targets: &[Target],
    init: Params,
    data: Dataset,
    progress: &mut (dyn Progress + Send),
) -> Result<(TrainOutcome, Params)> {
    if targets.iter().any(|t| t.backend != targets[0].backend) {
        return Err(FerroError::arg(
            "devices",
            "mixed backends",
            "all devices of a data-parallel run must be of one backend",
        ));
    }
    let _session = SESSION.lock().unwrap_or_else(|e| e.into_inner());
    collective::reset();
    let progress = Mutex::new(progress);
    let results: Vec<Result<(TrainOutcome, Params)>> = std::thread::scope(|s| {
        let handles: Vec<_> = targets
            .iter()
            .enumerate()
            .map(|(r, t)| {
                let (data, init, progress) = (data.clone(), init.clone(), &progress);
                s.spawn(move || {
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        let progress = (r == 0).then_some(progress);
                        replica(plan, t, r, targets.len(), init, data, progress)
                    }))
                    .unwrap_or_else(|_| {
                        Err(FerroError::BackendFailed {
                            backend: t.label(),
                            detail: format!("data-parallel replica {r} panicked"),
                        })
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("replica threads catch their panics"))
            .collect()
    });
    // Every replica holds the same weights: report replica 0's.
    results
        .into_iter()
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .next()
        .ok_or_else(|| FerroError::arg("devices", "(none)", "name at least one device"))
}

type SharedProgress<'a> = Mutex<&'a mut (dyn Progress + Send)>;

/// One replica's whole run, in lockstep with the others through the all-reduce.
fn replica(
    plan: &Shared,
    t: &Target,
    r: usize,
    d: usize,
    init: Params,
    data: Dataset,
    progress: Option<&SharedProgress>,
) -> Result<(TrainOutcome, Params)> {
    let Shared { cfg, ctl, opt } = *plan;
    let id = r as u32;
    collective::register(id, d)?;
    let out = (|| {
        // Every replica reports whether its engine came up, so none waits
        // forever in an all-reduce that a failed peer will never join.
        let data_len = data.len();
        let engine = super::fused_replica(t, cfg, data, init);
        let up = collective::sum(id, &[f32::from(u8::from(engine.is_ok()))])?;
        let mut engine = engine?;
        if up[0] < d as f32 {
            return Err(FerroError::BackendFailed {
                backend: t.label(),
                detail: "another data-parallel replica could not start its engine".into(),
            });
        }
        if let Some(o) = opt {
            engine.load_optimizer_state(o)?;
        }
        let mut plan = BatchPlan::new(cfg);
        let (mut curve, mut first_step_seconds, mut reached) = (Vec::new(), 0.0, false);
        let mut steps_done = ctl.start_step;
        // One untimed gradient of a few points compiles the kernels (a GPU
        // replica's first step paid 0.4–0.9 s of NVRTC on the clock); taking it
        // leaves weights and optimizer state as they were.
        let few = data_len.min(WARM_POINTS);
        engine.accumulate(&Batch::Range(0, few), few)?;
        engine.take_gradient()?;
        run::ready(engine.as_mut())?;
        let start = Instant::now();
        let mut phases = Phases::from_env();
        for step in ctl.start_step..cfg.steps {
            phases.start();
            let batches: Vec<Batch> = (0..plan.accumulate())
                .map(|k| plan.batch(step, k))
                .collect();
            let count: usize = batches.iter().map(|b| b.len()).sum();
            for b in &batches {
                let part = shard(b, r, d);
                if !part.is_empty() {
                    engine.accumulate(&part, count)?;
                }
            }
            let local = engine.take_gradient()?;
            phases.end(0);
            let g = collective::sum(id, &local)?;
            phases.end(1);
            engine.apply_gradient(&g, lr_at(cfg.schedule, cfg.lr, step, cfg.steps))?;
            phases.end(2);
            steps_done = step + 1;
            let loss = g[g.len() - 1] as f64;
            if step == ctl.start_step {
                first_step_seconds = start.elapsed().as_secs_f64();
            }
            let log = step + 1 == cfg.steps || (step + 1).is_multiple_of(cfg.run.log_every);
            if !loss.is_finite() {
                return Err(FerroError::Diverged {
                    step,
                    value: loss as f32,
                });
            }
            if let Some(dir) = &ctl.checkpoints {
                checkpoint_step(engine.as_mut(), id, cfg, ctl, dir, steps_done)?;
            }
            if log {
                curve.push(LossPoint {
                    val_loss: None,
                    step,
                    loss,
                    seconds: start.elapsed().as_secs_f64(),
                });
            }
            if let Some(p) = progress {
                p.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .update(step, log.then_some(loss));
            }
            // Every replica sees the same summed loss, so all stop together.
            if log && cfg.run.target_loss.is_some_and(|tl| loss <= tl) {
                reached = true;
                break;
            }
        }
        engine.sync()?;
        let train_seconds = start.elapsed().as_secs_f64();
        if let Some(s) = phases.summary(&format!("replica {r} ({})", t.label())) {
            eprintln!("{s}");
        }
        let params = engine.params()?;
        Ok((
            TrainOutcome {
                steps: steps_done,
                final_loss: curve.last().map_or(f64::NAN, |p| p.loss),
                train_seconds,
                steps_per_second: steps_done as f64 / train_seconds.max(1e-12),
                first_step_seconds,
                curve,
                reached_target: reached,
                skipped_steps: 0,
            },
            params,
        ))
    })();
    collective::finish(id);
    out
}

/// After `done` steps with a checkpoint folder: stops every replica when any
/// saw Ctrl-C, and writes a checkpoint (replica 0) when one is due or on
/// stopping. Every replica takes part in both all-reduces, so all agree.
fn checkpoint_step(
    engine: &mut dyn FlatEngine,
    id: u32,
    cfg: &TrainConfig,
    ctl: &Control,
    dir: &std::path::Path,
    done: usize,
) -> Result<()> {
    let asked = f32::from(u8::from(crate::interrupt::requested()));
    let stop = collective::sum(id, &[asked])?[0] > 0.0;
    let due = cfg
        .run
        .checkpoint_every
        .is_some_and(|k| done.is_multiple_of(k) && done < cfg.steps);
    if !(stop || due) {
        return Ok(());
    }
    let saved = if id == 0 {
        Some(run::save_checkpoint(engine, cfg, ctl, dir, done))
    } else {
        None
    };
    let failed = f32::from(u8::from(matches!(saved, Some(Err(_)))));
    if collective::sum(id, &[failed])?[0] > 0.0 {
        return Err(match saved {
            Some(Err(e)) => e,
            _ => FerroError::BackendFailed {
                backend: "collective".into(),
                detail: "replica 0 could not write the checkpoint".into(),
            },
        });
    }
    if stop {
        let saved = match saved {
            Some(Ok(path)) => path.display().to_string(),
            _ => dir.display().to_string(),
        };
        return Err(FerroError::Interrupted { step: done, saved });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_a_batch_exactly_once() {
        for (n, d) in [(10, 3), (7, 7), (5, 8), (1000, 2)] {
            let b = Batch::Range(100, 100 + n);
            let mut next = 100;
            for r in 0..d {
                let Batch::Range(s, e) = shard(&b, r, d) else {
                    panic!()
                };
                assert_eq!(s, next);
                next = e;
            }
            assert_eq!(next, 100 + n);
            let ix = Batch::Indices((0..n as u32).rev().collect());
            let total: usize = (0..d).map(|r| shard(&ix, r, d).len()).sum();
            assert_eq!(total, n);
        }
    }
}
