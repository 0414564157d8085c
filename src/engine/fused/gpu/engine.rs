//! The fused engine on a GPU: data, master weights, optimizer state and the
//! carried gradient live on the device. A full-batch step is queued and run
//! with the steps after it in one persistent launch ([`crate::engine::fused::gpu::steps`]);
//! any other step is [`fused_grad`](crate::engine::fused::gpu::kernels::fused::fused_grad) per
//! micro-batch plus one [`reduce_update`](crate::engine::fused::gpu::kernels::fused::reduce_update).
//! Models the per-point kernels cannot hold (several hidden layers, or more
//! than [`MAX_GPU_PARAMS`](crate::engine::fused::gpu_kernel_limits::MAX_GPU_PARAMS) parameters) take [`tiled_grad`](crate::engine::fused::gpu::kernels::tiled::tiled_grad) in place of
//! `fused_grad`, always two launches per step.
//! The loss is read back only when the training loop asks for it. The
//! launches themselves are in [`crate::engine::fused::gpu::launch`].

use crate::batches::Batch;
use crate::config::{Precision, TrainConfig};
use crate::engine::checkpoint::OptState;
use crate::engine::fused::gpu::buffers::{pod_bytes, Buffers};
use crate::engine::fused::gpu::compiler::{compiler, nvrtc, spirv};
use crate::engine::fused::gpu::kernels::ops::{row_reduction, use_planes};
use crate::engine::fused::gpu::kernels::split::split_lanes;
use crate::engine::fused::gpu::knobs::{bounds_checks, load_ahead};
use crate::engine::fused::gpu::memo::Memo;
use crate::engine::fused::gpu::shape::{Blocks, Pass, Shape};
use crate::engine::fused::gpu::steps::{Persistent, QueuedStep};
use crate::engine::fused::gpu::tensor::tensor_plan;
use crate::engine::fused::gpu::tiled_plan::{tiled_layout, TiledDevice};
use crate::engine::fused::gpu_kernel_limits::takes_tiled;
use crate::engine::fused::half::Half;
use crate::engine::{FlatEngine, StepEngine};
use crate::error::{FerroError, Result};
use crate::model::Params;
use crate::task::Dataset;
use cubecl::prelude::*;
use cubecl::server::Handle;

/// Points each unit handles, at least, before more cubes are launched, unless
/// the run sets `points_per_unit` (`ferrofit tune` sweeps it).
pub const POINTS_PER_UNIT: usize = 16;

/// Most cubes a micro-batch is spread over (bounds the partials buffer).
pub(super) const MAX_CUBES: usize = 2048;

/// Most values of the tiled kernel's partial rows (64 MiB, half the 128 MiB
/// storage binding every WebGPU device allows): wide models get fewer cubes.
const TILED_PARTIALS: usize = 1 << 24;

/// Fused GPU engine on CubeCL runtime `R`.
pub struct GpuFused<R: Runtime> {
    pub(super) client: ComputeClient<R>,
    pub(super) cfg: TrainConfig,
    pub(super) np: usize,
    pub(super) n: usize,
    /// The device memory.
    pub(super) buf: Buffers,
    /// Cubes whose partials are waiting to be reduced.
    pub(super) pending: Option<u32>,
    pub(super) step: i32,
    pub(super) template: Params,
    /// How this device runs the kernels' passes (planes, scratch, loads
    /// ahead, lanes, tile); `use_idx` is set per launch.
    pub(super) pass: Pass,
    /// The device is a GPU API on the CPU (lavapipe).
    pub(super) software: bool,
    /// Where it keeps what it measured about the device between runs.
    pub(super) memo: Memo,
    /// The persistent path, when enabled and the device runs it.
    pub(super) persistent: Option<Persistent>,
    /// A full-batch micro-batch `(start, len, scale)` waiting for `apply`.
    pub(super) deferred: Option<(u32, u32, f32)>,
    /// Partial rows the partials buffer holds.
    pub(super) max_cubes: usize,
    /// The gradient kernels run with CubeCL's bounds checks
    /// ([`bounds_checks`]).
    pub(super) checked: bool,
}

/// True when every step of `cfg` is one micro-batch of consecutive points
/// (full batch, no accumulation): the steps the persistent kernel runs.
pub(super) fn whole_steps(cfg: &TrainConfig) -> bool {
    cfg.accumulate == 1 && cfg.batch_size.is_none_or(|b| b >= cfg.n)
}

impl<R: Runtime> GpuFused<R> {
    /// Uploads `data` and `init` to `device`. The caller has checked the
    /// envelope; `software` says the device is a GPU API on the CPU
    /// (lavapipe); `memo` keeps what the engine measures about the device.
    pub fn new(
        cfg: &TrainConfig,
        data: &Dataset,
        init: Params,
        device: &R::Device,
        software: bool,
        memo: Memo,
    ) -> Self {
        let opened = std::time::Instant::now();
        let client = R::client(device);
        let client_seconds = opened.elapsed().as_secs_f64();
        let hidden = cfg.model.hidden;
        let np = init.len();
        let flat = init.flatten();
        let plane_min = client.properties().hardware.plane_size_min;
        let plane = use_planes(
            client
                .features()
                .plane
                .contains(cubecl::features::Plane::Ops),
            plane_min,
        );
        let (inputs, outputs) = (cfg.model.inputs, cfg.model.outputs);
        let lanes = match cfg.kernel.lanes {
            // Shuffles stay within a plane: at most the device's smallest.
            Some(l) if plane => l.min(plane_min as usize),
            Some(l) => l,
            None => split_lanes(inputs, hidden, outputs, plane, plane_min),
        };
        let (scatter, scratch) = row_reduction(np + 1, plane, plane_min, lanes);
        let m = &cfg.model;
        // Half precision on the tensor cores where they take the model, else
        // emulated on the tiled kernel's one-value passes.
        let tensor = (cfg.precision != Precision::F32)
            .then(|| tensor_plan(&client, cfg).ok())
            .flatten();
        let half = Half::of(cfg.precision).filter(|_| tensor.is_none());
        let checked = bounds_checks();
        // The tiled kernel's tile and blocks, where it runs (other kernels ignore the blocks).
        let tiled = (tensor.is_none() && takes_tiled(m.layers, np)).then(|| {
            let hardware = &client.properties().hardware;
            let device = TiledDevice {
                max_shared: hardware.max_shared_memory_size,
                max_units: hardware.max_units_per_cube as usize,
                plane,
                cuda: nvrtc(&client) && half.is_none(),
                checked,
            };
            tiled_layout(&Shape::of(cfg), device, cfg.kernel.tiled_threads)
        });
        let tile = tensor.map(|p| p.tile).or(tiled.map(|(t, _)| t));
        let blocks = tiled.map_or_else(Blocks::default, |(_, b)| b);
        let max_cubes = match tile {
            Some(_) => (TILED_PARTIALS / (np + 1)).clamp(1, MAX_CUBES),
            None => MAX_CUBES,
        };
        let spirv = spirv(&client);
        let uploaded = std::time::Instant::now();
        let buf = Buffers::upload(&client, data, &flat, max_cubes);
        let upload_seconds = uploaded.elapsed().as_secs_f64();
        let mut engine = GpuFused {
            buf,
            client,
            cfg: cfg.clone(),
            np,
            n: data.len(),
            pending: None,
            step: 0,
            template: init,
            pass: Pass {
                use_idx: false,
                plane,
                scatter,
                scratch,
                // Wide models spill registers already: loading ahead only adds code.
                ahead: if software || np > 64 { 1 } else { load_ahead() },
                lanes,
                tile: tile.unwrap_or(0),
                blocks,
                tensor,
                half,
                spirv,
            },
            software,
            memo,
            persistent: None,
            deferred: None,
            max_cubes,
            checked,
        };
        let probed = std::time::Instant::now();
        if cfg.kernel.persistent && whole_steps(cfg) && tile.is_none() {
            engine.persistent = Persistent::start(&engine, device);
        }
        log::debug!(
            "fused engine set-up: runtime client {client_seconds:.3} s, buffers {upload_seconds:.3} s, persistent grid {:.3} s",
            probed.elapsed().as_secs_f64()
        );
        super::buffers::settle(&engine.client);
        engine
    }

    pub(super) fn read(&self, h: &Handle, len: usize) -> Result<Vec<f32>> {
        let bytes = self
            .client
            .read_one(h.clone())
            .map_err(|e| FerroError::BackendFailed {
                backend: "cubecl".into(),
                detail: format!("{e:?}"),
            })?;
        Ok(bytes[..len * 4]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }

    /// Runs queued persistent steps, then a deferred micro-batch the two-launch way.
    pub(super) fn settle(&mut self) {
        self.flush();
        if let Some((start, len, scale)) = self.deferred.take() {
            self.launch_grad(start as usize, len as usize, None, scale);
        }
    }

    /// `loss_out`, failing when a persistent launch could not run its grid.
    fn loss_and_status(&mut self) -> Result<f32> {
        self.flush();
        let out = self.read(&self.buf.loss_out, 2)?;
        if out[1] != 0.0 {
            let cubes = self.persistent.as_ref().map_or(0, |p| p.cubes);
            return Err(FerroError::BackendFailed {
                backend: "cubecl".into(),
                detail: format!(
                    "the persistent fused kernel's {cubes} workgroups did not all run at once on this device; rerun with --no-persistent"
                ),
            });
        }
        Ok(out[0])
    }
}

impl<R: Runtime> StepEngine for GpuFused<R> {
    fn tensor_cores(&self) -> bool {
        self.pass.tensor.is_some()
    }

    fn detail(&self) -> Option<String> {
        let d = self.kernel_detail()?;
        let d = format!("{d}; shaders in {}", compiler(&self.client));
        Some(if self.checked && self.pass.tensor.is_none() {
            format!("{d}; bounds-checked (FERROFIT_BOUNDS_CHECKS)")
        } else {
            d
        })
    }

    fn accumulate(&mut self, batch: &Batch, count: usize) -> Result<()> {
        let scale = 1.0 / (count * self.cfg.model.outputs) as f32;
        if let (Some(_), None, None, Batch::Range(s, e)) =
            (&self.persistent, self.pending, self.deferred, batch)
        {
            if e - s == count {
                // A whole step in one range: it can join the persistent queue.
                self.deferred = Some((*s as u32, count as u32, scale));
                return Ok(());
            }
        }
        self.reduce_pending();
        match batch {
            Batch::Range(s, e) => self.launch_grad(*s, e - s, None, scale),
            Batch::Indices(v) => {
                let idx = self.client.create_from_slice(pod_bytes(v));
                self.launch_grad(0, v.len(), Some(idx), scale)
            }
        }
        Ok(())
    }

    fn apply(&mut self, lr: f64) -> Result<()> {
        self.step += 1;
        if let Some((start, len, scale)) = self.deferred.take() {
            let step = QueuedStep::new(start, len, scale, lr, self.step);
            self.enqueue(step);
            return Ok(());
        }
        self.reduce(true, lr);
        Ok(())
    }

    fn last_loss(&mut self) -> Result<f64> {
        Ok(self.loss_and_status()? as f64)
    }

    fn sync(&mut self) -> Result<()> {
        self.flush();
        cubecl::future::block_on(self.client.sync()).map_err(|e| FerroError::BackendFailed {
            backend: "cubecl".into(),
            detail: format!("{e:?}"),
        })
    }

    fn params(&mut self) -> Result<Params> {
        self.loss_and_status()?;
        Ok(self
            .template
            .with_flat(&self.read(&self.buf.params, self.np)?))
    }

    fn gradient(&mut self, batch: &Batch) -> Result<Vec<f32>> {
        crate::engine::flat_gradient(self, batch)
    }
}

impl<R: Runtime> FlatEngine for GpuFused<R> {
    fn optimizer_state(&mut self) -> Result<OptState> {
        self.reduce_pending();
        Ok(OptState {
            m: self.read(&self.buf.m, self.np)?,
            v: self.read(&self.buf.v, self.np)?,
            t: self.step,
        })
    }

    fn take_gradient(&mut self) -> Result<Vec<f32>> {
        self.reduce_pending();
        let g = self.read(&self.buf.carry, self.np + 1)?;
        self.zero_carry();
        Ok(g)
    }

    fn apply_gradient(&mut self, g: &[f32], lr: f64) -> Result<()> {
        // The summed gradient becomes the carry; an update with no new partials applies it.
        self.settle();
        self.buf.carry = self.client.create_from_slice(pod_bytes(g));
        self.pending = None;
        self.apply(lr)
    }

    fn load_optimizer_state(&mut self, s: &OptState) -> Result<()> {
        self.flush();
        let pad = |v: &[f32]| {
            let mut out = v.to_vec();
            out.resize(self.np + 1, 0.0);
            out
        };
        self.buf.m = self.client.create_from_slice(pod_bytes(&pad(&s.m)));
        self.buf.v = self.client.create_from_slice(pod_bytes(&pad(&s.v)));
        self.step = s.t;
        Ok(())
    }

    fn launch_grid(&self) -> Option<u32> {
        self.persistent.as_ref().map(|p| p.cubes)
    }

    fn restart(&mut self, init: &Params) -> Result<()> {
        // What the last run queued runs first; then all but the data is new.
        self.settle();
        self.pending = None;
        self.buf.params = self.client.create_from_slice(pod_bytes(&init.flatten()));
        self.zero_carry();
        self.buf.loss_out = self.client.create_from_slice(pod_bytes(&[f32::NAN, 0.0]));
        self.template = init.clone();
        self.load_optimizer_state(&OptState::default())?;
        super::buffers::settle(&self.client);
        Ok(())
    }
}
