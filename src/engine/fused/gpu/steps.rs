//! Host side of the persistent kernel ([`crate::engine::fused::gpu::kernels::persistent`]): full-batch
//! steps queue up in the engine and run together in one launch when the loss,
//! the weights or a sync is asked for (or the queue is full).
//!
//! Before first use on a device the engine probes the largest grid whose cubes
//! all run at once: a scratch engine on zeros launches a few zero-learning-rate
//! steps with a short spin bound on 1, 2, 4, … cubes (and every multiple of
//! the multiprocessor count, where the device says it) and keeps the last that
//! finishes without a timeout (a failing grid is slow to fail, so only one is
//! tried). The answer is cached per device and parameter count (registers)
//! in the process, and on disk by the engine's [`crate::engine::fused::gpu::memo::Memo`] (per
//! kernel shape and pass: the kernel cache's folder is already per device,
//! driver and build). A device where even one cube fails (or the probe
//! panics) keeps the two-launch path.

use crate::config::TrainConfig;
use crate::engine::fused::gpu::kernels::args::ExchangeLaunch;
use crate::engine::fused::gpu::kernels::ops::CUBE_UNITS;
use crate::engine::fused::gpu::kernels::persistent::{fused_steps, PlanLaunch, PLAN_F, PLAN_U};
use crate::engine::fused::gpu::memo::Memo;
use crate::engine::fused::gpu::shape::Shape;
use crate::engine::fused::gpu::{pod_bytes, GpuFused, POINTS_PER_UNIT};
use crate::engine::fused::optim::bias_corrections;
use crate::io::fnv1a;
use crate::task::Dataset;
use cubecl::prelude::*;
use cubecl::server::Handle;
use std::collections::HashMap;
use std::sync::Mutex;

/// Steps queued before a launch is forced.
const MAX_QUEUED: usize = 1024;
/// Grids the probe tries on any device, smallest first (to each is added
/// every multiple of the multiprocessor count, where the device says it).
const GRIDS: [u32; 11] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];
/// Largest grid the probe tries.
const MAX_GRID: u32 = GRIDS[GRIDS.len() - 1];
/// Polls a probe's cube waits before it counts the grid as not co-resident.
const PROBE_SPIN: u32 = 1 << 16;
/// The same on a software device (lavapipe), whose workgroups run on the
/// host's threads, which a loaded machine deschedules for milliseconds: with
/// the short wait, lavapipe's probe answered 1 or 2 cubes from run to run on
/// two cores, and a run that probed anew (a resumed one) summed in another
/// order. Grids beyond the host's threads are not tried there (a failing
/// try would spin this long).
const PROBE_SPIN_SOFTWARE: u32 = 1 << 20;
/// Steps each probe runs (two full tag cycles).
const PROBE_STEPS: usize = 4;

/// Largest working grid per device and parameter count (`None`: none works).
static PROBED: Mutex<Option<HashMap<String, Option<u32>>>> = Mutex::new(None);

/// One full-batch optimizer step waiting for the persistent kernel.
#[derive(Clone, Copy, Debug)]
pub struct QueuedStep {
    start: u32,
    len: u32,
    scale: f32,
    lr: f32,
    bias1: f32,
    bias2: f32,
    first: bool,
}

impl QueuedStep {
    /// Step number `t` (from 1) over `len` points from `start`.
    pub fn new(start: u32, len: u32, scale: f32, lr: f64, t: i32) -> QueuedStep {
        let (bias1, bias2) = bias_corrections(t.max(1));
        QueuedStep {
            start,
            len,
            scale,
            lr: lr as f32,
            bias1,
            bias2,
            first: t == 1,
        }
    }
}

/// The persistent path's buffers and queue.
pub struct Persistent {
    /// Cubes in every launch (all resident at once on this device).
    pub cubes: u32,
    rows: Handle,
    totals: Handle,
    status: Handle,
    /// Steps run so far on `rows`/`totals` (their tags continue from here).
    epoch: u32,
    queue: Vec<QueuedStep>,
}

impl Persistent {
    /// Probes (or recalls) the grid for `engine`'s device; `None` when the
    /// persistent kernel cannot run there.
    pub fn start<R: Runtime>(engine: &GpuFused<R>, device: &R::Device) -> Option<Persistent> {
        // Residency depends on the kernel's registers, which its width drives.
        let key = format!("{device:?}/{}", engine.np);
        let known = PROBED
            .lock()
            .ok()
            .and_then(|m| m.as_ref().and_then(|m| m.get(&key).copied()));
        let max = match known {
            Some(g) => g,
            None => {
                let g = recall_or_probe(engine, device);
                if let Ok(mut m) = PROBED.lock() {
                    m.get_or_insert_with(HashMap::new).insert(key, g);
                }
                g
            }
        }?;
        // As many cubes as the points need at the usual points per unit, up to the probe's grid.
        let per_cube =
            CUBE_UNITS as usize * engine.cfg.kernel.points_per_unit.unwrap_or(POINTS_PER_UNIT);
        // At least one cube per gradient column, so the columns reduce in parallel.
        let width = engine.np as u32 + 1;
        let wanted = (engine.n.div_ceil(per_cube) as u32)
            .max(width)
            .clamp(1, max);
        // A resumed run keeps the grid of the run it continues, where it runs here.
        let cubes = match engine.cfg.kernel.grid {
            Some(g) if (1..=max).contains(&g) => g,
            Some(g) => {
                log::warn!(
                    "the run this one continues used {g} workgroups, more than run at once here ({max}): {wanted} instead, so its sums take another order"
                );
                wanted
            }
            None => wanted,
        };
        log::debug!("persistent kernel: {cubes} cubes (the probe's grid: {max})");
        Some(Persistent::fresh(engine, cubes))
    }

    /// Buffers for `cubes` cubes, every slot tagged "not yet written".
    fn fresh<R: Runtime>(engine: &GpuFused<R>, cubes: u32) -> Persistent {
        let width = engine.np + 1;
        let ones = |len: usize| engine.client.create_from_slice(pod_bytes(&vec![1u32; len]));
        Persistent {
            cubes,
            rows: ones(2 * cubes as usize * width),
            totals: ones(2 * cubes as usize * width),
            status: engine.client.create_from_slice(pod_bytes(&[0u32])),
            epoch: 0,
            queue: Vec::new(),
        }
    }
}

/// The probe's answer for `engine`'s kernel as the memo kept it, or
/// measured (and kept).
fn recall_or_probe<R: Runtime>(engine: &GpuFused<R>, device: &R::Device) -> Option<u32> {
    let what = format!("{:?}/{:?}", Shape::of(&engine.cfg), engine.pass);
    let key = format!("persistent-grid-{:016x}", fnv1a(&[what.as_bytes()]));
    match engine.memo.recall(&key).as_deref() {
        Some("none") => return None,
        Some(v) => {
            if let Ok(g) = v.parse() {
                return Some(g);
            }
        }
        None => {}
    }
    let g = probe(engine, device);
    engine
        .memo
        .remember(&key, &g.map_or("none".into(), |g: u32| g.to_string()));
    g
}

/// The largest grid of [`grids`] that runs `engine`'s kernel with every cube
/// resident. The probe trains a copy of the model on zeros in its own small
/// engine, so the run's data, weights and optimizer state are never touched
/// (and a run whose data did not fit fails in training, as it should).
fn probe<R: Runtime>(engine: &GpuFused<R>, device: &R::Device) -> Option<u32> {
    let cfg = &engine.cfg;
    let points = MAX_GRID as usize * CUBE_UNITS as usize;
    let zeros = Dataset {
        x: vec![0.0; points * cfg.model.inputs],
        y: vec![0.0; points * cfg.model.outputs],
        inputs: cfg.model.inputs,
        outputs: cfg.model.outputs,
    };
    let probe_cfg = TrainConfig {
        n: points,
        kernel: crate::config::KernelKnobs {
            persistent: false,
            ..cfg.kernel.clone()
        },
        ..cfg.clone()
    };
    let scratch = GpuFused::<R>::new(
        &probe_cfg,
        &zeros,
        engine.template.clone(),
        device,
        engine.software,
        Memo::default(),
    );
    let sms = engine
        .client
        .properties()
        .hardware
        .num_streaming_multiprocessors;
    let (spin, most) = if engine.software {
        (PROBE_SPIN_SOFTWARE, host_threads())
    } else {
        (PROBE_SPIN, MAX_GRID)
    };
    let mut found = None;
    for g in grids(sms).into_iter().filter(|&g| g <= most) {
        let mut p = Persistent::fresh(&scratch, g);
        let len = g * CUBE_UNITS;
        p.queue = vec![QueuedStep::new(0, len, 1.0 / len as f32, 0.0, 1); PROBE_STEPS];
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            launch(&scratch, &mut p, spin);
            scratch.read(&scratch.buf.loss_out, 2)
        }));
        match ran {
            Ok(Ok(out)) if out[1] == 0.0 => found = Some(g),
            _ => break,
        }
    }
    found
}

/// Workgroups a software device can run at once: one a thread of its pool,
/// which has `LP_NUM_THREADS` threads (lavapipe's variable) or one a core.
fn host_threads() -> u32 {
    std::env::var("LP_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .or_else(|| {
            std::thread::available_parallelism()
                .ok()
                .map(|n| n.get() as u32)
        })
        .unwrap_or(1)
        .max(1)
}

/// The grids the probe tries, smallest first: [`GRIDS`] and, on a device of
/// `sms` multiprocessors, every multiple of it up to [`MAX_GRID`] — the
/// largest grid that runs is then a whole number of cubes a multiprocessor
/// (2 or 3 a multiprocessor on a 132-multiprocessor GPU is 264 or 396 cubes,
/// which powers of two alone would cut to 256: every multiprocessor busy, but
/// a third of the resident warps unused at 3).
fn grids(sms: Option<u32>) -> Vec<u32> {
    let mut g = GRIDS.to_vec();
    if let Some(sms) = sms.filter(|&s| s > 0) {
        g.extend((1..=MAX_GRID / sms).map(|k| k * sms));
    }
    g.sort_unstable();
    g.dedup();
    g
}

/// Launches `p`'s queued steps in one `fused_steps` and empties the queue.
fn launch<R: Runtime>(engine: &GpuFused<R>, p: &mut Persistent, spin_limit: u32) {
    if p.queue.is_empty() {
        return;
    }
    let steps = p.queue.len();
    let mut plan_u = Vec::with_capacity(PLAN_U * steps);
    let mut plan_f = Vec::with_capacity(PLAN_F * steps);
    for s in p.queue.drain(..) {
        plan_u.extend([s.start, s.len]);
        plan_f.extend([
            s.lr,
            s.bias1,
            s.bias2,
            s.scale,
            f32::from(u8::from(s.first)),
        ]);
    }
    let (client, cfg, np) = (&engine.client, &engine.cfg, engine.np);
    let width = np + 1;
    let plan_u_h = client.create_from_slice(pod_bytes(&plan_u));
    let plan_f_h = client.create_from_slice(pod_bytes(&plan_f));
    let rows = 2 * p.cubes as usize * width;
    let (count, dim) = (
        CubeCount::Static(p.cubes, 1, 1),
        CubeDim::new_1d(CUBE_UNITS),
    );
    // The persistent kernel walks ranges only.
    let (shape, pass) = (Shape::of(cfg), engine.pass_for(false));
    // SAFETY: every buffer was allocated with the length passed here; plan
    // ranges lie inside the data (the batch planner made them), and the
    // kernel indexes rows and mailboxes by cube and column only.
    unsafe {
        let exchange = ExchangeLaunch::new(
            ArrayArg::from_raw_parts(p.rows.clone(), rows),
            ArrayArg::from_raw_parts(p.totals.clone(), rows),
            ArrayArg::from_raw_parts(p.status.clone(), 1),
        );
        let plan = PlanLaunch::new(
            ArrayArg::from_raw_parts(plan_u_h, plan_u.len()),
            ArrayArg::from_raw_parts(plan_f_h, plan_f.len()),
            steps as u32,
            p.epoch,
            spin_limit,
            cfg.weight_decay as f32,
        );
        let (points, state) = (engine.points_arg(None, 0), engine.state_arg());
        if engine.checked {
            fused_steps::launch::<f32, R>(
                client, count, dim, points, state, exchange, plan, shape, pass,
            )
        } else {
            fused_steps::launch_unchecked::<f32, R>(
                client, count, dim, points, state, exchange, plan, shape, pass,
            )
        }
    };
    p.epoch = p.epoch.wrapping_add(steps as u32);
}

impl<R: Runtime> GpuFused<R> {
    /// Queues a full-batch step for the persistent kernel.
    pub(crate) fn enqueue(&mut self, step: QueuedStep) {
        let full = match self.persistent.as_mut() {
            Some(p) => {
                p.queue.push(step);
                p.queue.len() >= MAX_QUEUED
            }
            None => false,
        };
        if full {
            self.flush();
        }
    }

    /// Runs every queued step (one launch).
    pub(crate) fn flush(&mut self) {
        if let Some(mut p) = self.persistent.take() {
            // A wait this long means the grid is not resident. A cube polls a
            // few thousand times while the others finish a 1e8-point step; the
            // bound grows with the data and stays under a minute of polling.
            let spin = (self.n / 4).clamp(1 << 20, 1 << 26) as u32;
            launch(self, &mut p, spin);
            self.persistent = Some(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_tries_whole_multiprocessor_multiples_in_order() {
        let g = grids(Some(132));
        assert!(g.windows(2).all(|w| w[0] < w[1]), "{g:?}");
        for k in 1..=7 {
            assert!(g.contains(&(132 * k)), "{k} cubes a multiprocessor: {g:?}");
        }
        assert!(g.contains(&256) && *g.last().unwrap() <= MAX_GRID);
        assert_eq!(grids(None), GRIDS.to_vec());
        assert_eq!(grids(Some(0)), GRIDS.to_vec());
    }
}
