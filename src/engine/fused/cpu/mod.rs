//! The fused engine on the CPU: [`kernel`] for the step (any model of the
//! envelope through [`block`]; the seed shape through explicit AVX2+FMA in
//! [`simd`] on x86-64), [`FlatOptimizer`] for the update, all in host memory;
//! f16/bf16 operands of the hidden-to-hidden products emulated by
//! [`crate::engine::fused::half`].

pub mod block;
pub mod chunk;
pub mod kernel;
#[cfg(target_arch = "x86_64")]
pub mod simd;

use crate::batches::Batch;
use crate::config::TrainConfig;
use crate::engine::checkpoint::OptState;
use crate::engine::fused::half::Half;
use crate::engine::fused::optim::FlatOptimizer;
use crate::engine::{FlatEngine, StepEngine};
use crate::error::Result;
use crate::model::Params;
use crate::task::Dataset;

/// Fused CPU engine state.
pub struct CpuFused {
    cfg: TrainConfig,
    data: Dataset,
    params: Params,
    /// Half-precision operands (`--precision f16|bf16`), and `params` with
    /// the hidden-to-hidden weights rounded to them.
    half: Option<(Half, Params)>,
    flat: Vec<f32>,
    grad: Vec<f64>,
    loss_sum: f64,
    last_loss: f64,
    optim: FlatOptimizer,
}

impl CpuFused {
    /// An engine that starts from `init` on `data`.
    pub fn new(cfg: &TrainConfig, data: Dataset, init: Params) -> Self {
        let flat = init.flatten();
        let half = Half::of(cfg.precision).map(|h| (h, h.operands(&init)));
        CpuFused {
            half,
            optim: FlatOptimizer::new(cfg.optimizer, cfg.weight_decay, flat.len()),
            grad: vec![0.0; flat.len()],
            cfg: cfg.clone(),
            data,
            params: init,
            flat,
            loss_sum: 0.0,
            last_loss: f64::NAN,
        }
    }
}

/// Scales each tensor's slice of the flat gradient (weight, then bias, per
/// layer — [`Params::flatten`] order) down to L2 norm `max`, as Burn's `Norm`
/// clipping does.
pub fn clip_per_tensor(p: &Params, g: &mut [f32], max: f32) {
    let mut at = 0;
    for l in &p.layers {
        for len in [l.w.len(), l.b.len()] {
            let t = &mut g[at..at + len];
            let norm = t.iter().map(|v| v * v).sum::<f32>().sqrt();
            if norm > max {
                t.iter_mut().for_each(|v| *v *= max / norm);
            }
            at += len;
        }
    }
}

impl StepEngine for CpuFused {
    fn accumulate(&mut self, batch: &Batch, count: usize) -> Result<()> {
        let denom = (count * self.data.outputs) as f32;
        let m = &self.cfg.model;
        let (params, half) = match &self.half {
            Some((h, rounded)) => (rounded, Some(*h)),
            None => (&self.params, None),
        };
        let (l, g) = kernel::loss_and_grad(
            params,
            m.activation,
            self.cfg.loss,
            &self.data,
            batch,
            1.0 / denom,
            half,
        );
        self.loss_sum += l / denom as f64;
        for (a, v) in self.grad.iter_mut().zip(g) {
            *a += v;
        }
        Ok(())
    }

    fn apply(&mut self, lr: f64) -> Result<()> {
        let mut g: Vec<f32> = self.grad.iter().map(|&v| v as f32).collect();
        if let Some(max) = self.cfg.clip_grad {
            clip_per_tensor(&self.params, &mut g, max as f32);
        }
        self.optim.step(&mut self.flat, &g, lr);
        self.params = self.params.with_flat(&self.flat);
        if let Some((h, rounded)) = &mut self.half {
            *rounded = h.operands(&self.params);
        }
        self.grad.iter_mut().for_each(|v| *v = 0.0);
        self.last_loss = std::mem::take(&mut self.loss_sum);
        Ok(())
    }

    fn last_loss(&mut self) -> Result<f64> {
        Ok(self.last_loss)
    }

    fn sync(&mut self) -> Result<()> {
        Ok(())
    }

    fn params(&mut self) -> Result<Params> {
        Ok(self.params.clone())
    }

    fn loss_is_free(&self) -> bool {
        true
    }

    fn detail(&self) -> Option<String> {
        let (h, _) = self.half.as_ref()?;
        Some(format!(
            "{} operands in the hidden-to-hidden products, rounded on the CPU \
             (f32 sums, biases, first and output layers, optimizer): the numerics \
             of the GPU's tensor-core pass, at f32's speed or below",
            match h {
                Half::Bf16 => "bf16",
                Half::F16 => "f16",
            }
        ))
    }

    fn gradient(&mut self, batch: &Batch) -> Result<Vec<f32>> {
        crate::engine::flat_gradient(self, batch)
    }
}

impl FlatEngine for CpuFused {
    fn optimizer_state(&mut self) -> Result<OptState> {
        Ok(self.optim.state())
    }

    fn load_optimizer_state(&mut self, s: &OptState) -> Result<()> {
        self.optim.load(s)
    }

    fn take_gradient(&mut self) -> Result<Vec<f32>> {
        let mut g: Vec<f32> = self.grad.iter().map(|&v| v as f32).collect();
        g.push(std::mem::take(&mut self.loss_sum) as f32);
        self.grad.iter_mut().for_each(|v| *v = 0.0);
        Ok(g)
    }

    fn apply_gradient(&mut self, g: &[f32], lr: f64) -> Result<()> {
        let np = self.grad.len();
        for (a, &v) in self.grad.iter_mut().zip(&g[..np]) {
            *a = v as f64;
        }
        self.loss_sum = g[np] as f64;
        self.apply(lr)
    }

    fn restart(&mut self, init: &Params) -> Result<()> {
        let empty = Dataset {
            x: Vec::new(),
            y: Vec::new(),
            ..self.data
        };
        let data = std::mem::replace(&mut self.data, empty);
        *self = CpuFused::new(&self.cfg, data, init.clone());
        Ok(())
    }
}
