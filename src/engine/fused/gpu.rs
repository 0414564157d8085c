//! The fused engine on a GPU: data, master weights, optimizer state and the
//! carried gradient live on the device; each optimizer step is
//! [`fused_grad`](super::gpu_kernel::fused_grad) per micro-batch plus one
//! [`reduce_update`](super::gpu_kernel::reduce_update). The loss is read back
//! only when the training loop asks for it.

use super::gpu_kernel::{fused_grad, reduce_update, CUBE_UNITS};
use super::optim::{BETA1, BETA2};
use crate::batches::Batch;
use crate::config::{Activation, Loss, OptimizerKind, TrainConfig};
use crate::engine::checkpoint::OptState;
use crate::engine::StepEngine;
use crate::error::{FerroError, Result};
use crate::model::Params;
use crate::task::Dataset;
use cubecl::prelude::*;
use cubecl::server::Handle;

/// Points each unit handles, at least, before more cubes are launched, unless
/// the run sets `points_per_unit` (`ferrofit tune` sweeps it).
pub const POINTS_PER_UNIT: usize = 16;

/// Most cubes a micro-batch is spread over (bounds the partials buffer).
const MAX_CUBES: usize = 2048;

/// Fused GPU engine on CubeCL runtime `R`.
pub struct GpuFused<R: Runtime> {
    client: ComputeClient<R>,
    cfg: TrainConfig,
    hidden: usize,
    np: usize,
    n: usize,
    x: Handle,
    y: Handle,
    no_idx: Handle,
    params: Handle,
    m: Handle,
    v: Handle,
    carry: Handle,
    partials: Handle,
    loss_out: Handle,
    /// Cubes whose partials are waiting to be reduced.
    pending: Option<u32>,
    step: i32,
    template: Params,
}

fn code_act(a: Activation) -> u32 {
    match a {
        Activation::Relu => 0,
        Activation::Tanh => 1,
        Activation::Sigmoid => 2,
        Activation::Silu => 3,
        Activation::Gelu => 4,
    }
}

fn code_loss(l: Loss) -> u32 {
    match l {
        Loss::Mse => 0,
        Loss::L1 => 1,
        Loss::Huber => 2,
    }
}

fn code_opt(o: OptimizerKind) -> u32 {
    match o {
        OptimizerKind::Sgd => 0,
        OptimizerKind::Momentum => 1,
        OptimizerKind::Adam => 2,
        OptimizerKind::Adamw => 3,
    }
}

/// The bytes of a slice of plain numbers (`f32`, `u32`).
fn pod_bytes<T: Copy + 'static>(v: &[T]) -> &[u8] {
    // SAFETY: only called with f32/u32, which have no padding; any byte pattern is a valid u8.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

impl<R: Runtime> GpuFused<R> {
    /// Uploads `data` and `init` to `device`. The caller has checked the envelope.
    pub fn new(cfg: &TrainConfig, data: &Dataset, init: Params, device: &R::Device) -> Self {
        let client = R::client(device);
        let hidden = cfg.model.hidden;
        let np = init.len();
        let flat = init.flatten();
        let zeros = vec![0f32; np + 1];
        GpuFused {
            x: client.create_from_slice(pod_bytes(&data.x)),
            y: client.create_from_slice(pod_bytes(&data.y)),
            no_idx: client.create_from_slice(&[0u8; 4]),
            params: client.create_from_slice(pod_bytes(&flat)),
            m: client.create_from_slice(pod_bytes(&zeros)),
            v: client.create_from_slice(pod_bytes(&zeros)),
            carry: client.create_from_slice(pod_bytes(&zeros)),
            partials: client.empty(MAX_CUBES * (np + 1) * 4),
            loss_out: client.create_from_slice(pod_bytes(&[f32::NAN])),
            client,
            cfg: cfg.clone(),
            hidden,
            np,
            n: data.len(),
            pending: None,
            step: 0,
            template: init,
        }
    }

    fn read(&self, h: &Handle, len: usize) -> Result<Vec<f32>> {
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

    /// Reduces pending partials; with `apply`, also steps the optimizer.
    fn reduce(&mut self, apply: bool, lr: f64) {
        let cubes = self.pending.take().unwrap_or(0);
        let wd = self.cfg.weight_decay as f32;
        let (b1, b2) = (
            1.0 - BETA1.powi(self.step.max(1)),
            1.0 - BETA2.powi(self.step.max(1)),
        );
        let np = self.np;
        // SAFETY: every buffer was allocated with the lengths passed here.
        unsafe {
            reduce_update::launch::<f32, R>(
                &self.client,
                CubeCount::Static(1, 1, 1),
                CubeDim::new_1d(256),
                ArrayArg::from_raw_parts(self.partials.clone(), MAX_CUBES * (np + 1)),
                ArrayArg::from_raw_parts(self.params.clone(), np),
                ArrayArg::from_raw_parts(self.m.clone(), np + 1),
                ArrayArg::from_raw_parts(self.v.clone(), np + 1),
                ArrayArg::from_raw_parts(self.carry.clone(), np + 1),
                ArrayArg::from_raw_parts(self.loss_out.clone(), 1),
                cubes,
                lr as f32,
                wd,
                b1,
                b2,
                u32::from(self.step == 1),
                np,
                code_opt(self.cfg.optimizer),
                apply,
            )
        };
    }

    /// Gradient of the mean loss over `batch` (for checks), flattened like [`Params::flatten`].
    pub fn gradient(&mut self, batch: &Batch) -> Result<Vec<f32>> {
        self.accumulate(batch, batch.len())?;
        self.reduce(false, 0.0);
        let g = self.read(&self.carry, self.np)?;
        let zeros = vec![0f32; self.np + 1];
        self.carry = self.client.create_from_slice(pod_bytes(&zeros));
        Ok(g)
    }
}

impl<R: Runtime> StepEngine for GpuFused<R> {
    fn accumulate(&mut self, batch: &Batch, count: usize) -> Result<()> {
        if self.pending.is_some() {
            self.reduce(false, 0.0);
        }
        let (start, len, idx) = match batch {
            Batch::Range(s, e) => (*s, e - s, None),
            Batch::Indices(v) => (
                0,
                v.len(),
                Some(self.client.create_from_slice(pod_bytes(v))),
            ),
        };
        let units = CUBE_UNITS as usize;
        let cubes = len
            .div_ceil(units * self.cfg.points_per_unit.unwrap_or(POINTS_PER_UNIT))
            .clamp(1, MAX_CUBES);
        let scale = 1.0 / (count * self.cfg.model.outputs) as f32;
        let (idx_handle, idx_len, use_idx) = match &idx {
            Some(h) => (h.clone(), len, true),
            None => (self.no_idx.clone(), 1, false),
        };
        // SAFETY: buffers hold `n` points, `idx` holds `len` indices < n, partials hold MAX_CUBES rows.
        unsafe {
            fused_grad::launch::<f32, R>(
                &self.client,
                CubeCount::Static(cubes as u32, 1, 1),
                CubeDim::new_1d(CUBE_UNITS),
                ArrayArg::from_raw_parts(self.x.clone(), self.n * self.cfg.model.inputs),
                ArrayArg::from_raw_parts(self.y.clone(), self.n * self.cfg.model.outputs),
                ArrayArg::from_raw_parts(idx_handle, idx_len),
                ArrayArg::from_raw_parts(self.params.clone(), self.np),
                ArrayArg::from_raw_parts(self.partials.clone(), MAX_CUBES * (self.np + 1)),
                start as u32,
                len as u32,
                scale,
                self.cfg.model.inputs,
                self.hidden,
                self.cfg.model.outputs,
                code_act(self.cfg.model.activation),
                code_loss(self.cfg.loss),
                use_idx,
            )
        };
        self.pending = Some(cubes as u32);
        Ok(())
    }

    fn apply(&mut self, lr: f64) -> Result<()> {
        self.step += 1;
        self.reduce(true, lr);
        Ok(())
    }

    fn last_loss(&mut self) -> Result<f64> {
        Ok(self.read(&self.loss_out, 1)?[0] as f64)
    }

    fn sync(&mut self) -> Result<()> {
        cubecl::future::block_on(self.client.sync()).map_err(|e| FerroError::BackendFailed {
            backend: "cubecl".into(),
            detail: format!("{e:?}"),
        })
    }

    fn params(&mut self) -> Result<Params> {
        Ok(self.template.with_flat(&self.read(&self.params, self.np)?))
    }

    fn optimizer_state(&mut self) -> Result<OptState> {
        if self.pending.is_some() {
            self.reduce(false, 0.0);
        }
        Ok(OptState {
            m: self.read(&self.m, self.np)?,
            v: self.read(&self.v, self.np)?,
            t: self.step,
        })
    }

    fn take_gradient(&mut self) -> Result<Vec<f32>> {
        if self.pending.is_some() {
            self.reduce(false, 0.0);
        }
        let g = self.read(&self.carry, self.np + 1)?;
        self.carry = self
            .client
            .create_from_slice(pod_bytes(&vec![0f32; self.np + 1]));
        Ok(g)
    }

    fn apply_gradient(&mut self, g: &[f32], lr: f64) -> Result<()> {
        // The summed gradient becomes the carry; an update with no new partials applies it.
        self.carry = self.client.create_from_slice(pod_bytes(g));
        self.pending = None;
        self.apply(lr)
    }

    fn load_optimizer_state(&mut self, s: &OptState) -> Result<()> {
        let pad = |v: &[f32]| {
            let mut out = v.to_vec();
            out.resize(self.np + 1, 0.0);
            out
        };
        self.m = self.client.create_from_slice(pod_bytes(&pad(&s.m)));
        self.v = self.client.create_from_slice(pod_bytes(&pad(&s.v)));
        self.step = s.t;
        Ok(())
    }
}
