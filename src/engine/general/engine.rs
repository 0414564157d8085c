//! [`StepEngine`] on Burn: autodiff for gradients, Burn's optimizers (created
//! once, outside the loop) for updates, loss scaling for f16.

use super::data::DeviceData;
use super::model::Mlp;
use super::scaler::LossScaler;
use crate::batches::Batch;
use crate::config::{Loss, OptimizerKind, TrainConfig};
use crate::engine::fused::optim::{BETA1, BETA2, EPSILON, MOMENTUM};
use crate::engine::StepEngine;
use crate::error::Result;
use crate::model::Params;
use crate::task::Dataset;
use burn::grad_clipping::GradientClippingConfig;
use burn::module::AutodiffModule;
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{
    Adam, AdamConfig, AdamW, AdamWConfig, GradientsAccumulator, GradientsParams, Optimizer, Sgd,
    SgdConfig,
};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;

/// One of Burn's optimizers for the MLP.
enum AnyOptim<B: AutodiffBackend> {
    Sgd(OptimizerAdaptor<Sgd<B::InnerBackend>, Mlp<B>, B>),
    Adam(OptimizerAdaptor<Adam, Mlp<B>, B>),
    AdamW(OptimizerAdaptor<AdamW, Mlp<B>, B>),
}

impl<B: AutodiffBackend> AnyOptim<B> {
    fn new(kind: OptimizerKind, wd: f64, clip: Option<f64>) -> Self {
        let decay = (wd > 0.0).then(|| WeightDecayConfig::new(wd as f32));
        let clip = clip.map(|c| GradientClippingConfig::Norm(c as f32));
        match kind {
            OptimizerKind::Sgd => AnyOptim::Sgd(
                SgdConfig::new()
                    .with_weight_decay(decay)
                    .with_gradient_clipping(clip)
                    .init(),
            ),
            OptimizerKind::Momentum => AnyOptim::Sgd(
                SgdConfig::new()
                    .with_weight_decay(decay)
                    .with_gradient_clipping(clip)
                    .with_momentum(Some(
                        MomentumConfig::new()
                            .with_momentum(MOMENTUM as f64)
                            .with_dampening(0.0),
                    ))
                    .init(),
            ),
            OptimizerKind::Adam => AnyOptim::Adam(
                AdamConfig::new()
                    .with_beta_1(BETA1)
                    .with_beta_2(BETA2)
                    .with_epsilon(EPSILON)
                    .with_weight_decay(decay)
                    .with_grad_clipping(clip)
                    .init(),
            ),
            OptimizerKind::Adamw => AnyOptim::AdamW(
                AdamWConfig::new()
                    .with_beta_1(BETA1)
                    .with_beta_2(BETA2)
                    .with_epsilon(EPSILON)
                    .with_weight_decay(wd as f32)
                    .with_grad_clipping(clip)
                    .init(),
            ),
        }
    }

    fn step(&mut self, lr: f64, m: Mlp<B>, g: GradientsParams) -> Mlp<B> {
        match self {
            AnyOptim::Sgd(o) => o.step(lr, m, g),
            AnyOptim::Adam(o) => o.step(lr, m, g),
            AnyOptim::AdamW(o) => o.step(lr, m, g),
        }
    }
}

/// The general engine on backend `B`.
pub struct GeneralEngine<B: AutodiffBackend> {
    cfg: TrainConfig,
    model: Option<Mlp<B>>,
    optim: AnyOptim<B>,
    data: DeviceData<B>,
    accum: GradientsAccumulator<Mlp<B>>,
    loss_sum: Option<Tensor<B::InnerBackend, 1>>,
    last_loss: Option<Tensor<B::InnerBackend, 1>>,
    scaler: LossScaler,
    device: B::Device,
}

impl<B: AutodiffBackend> GeneralEngine<B> {
    /// Model from `init`; data from `host` if given, else generated on the device.
    pub fn new(
        cfg: &TrainConfig,
        init: &Params,
        host: Option<&Dataset>,
        device: &B::Device,
    ) -> Result<Self> {
        let data = match host {
            Some(d) => DeviceData::upload(d, device),
            None => DeviceData::generate(cfg.data.task()?, cfg.n, cfg.seed, device),
        };
        Ok(GeneralEngine {
            model: Some(Mlp::from_params(init, device)),
            optim: AnyOptim::new(cfg.optimizer, cfg.weight_decay, cfg.clip_grad),
            data,
            accum: GradientsAccumulator::new(),
            loss_sum: None,
            last_loss: None,
            scaler: LossScaler::for_precision(cfg.precision),
            device: device.clone(),
            cfg: cfg.clone(),
        })
    }

    fn model(&self) -> &Mlp<B> {
        self.model.as_ref().expect("model is present between steps")
    }

    /// Mean loss of a micro-batch's points, divided so micro-batches add up to the step's mean.
    fn loss(&self, batch: &Batch, count: usize) -> Tensor<B, 1> {
        let (x, y) = self.data.batch(batch);
        let pred = self
            .model()
            .forward(x, self.cfg.model.activation, self.cfg.precision);
        let r = pred - y;
        let per = match self.cfg.loss {
            Loss::Mse => r.powi_scalar(2),
            Loss::L1 => r.abs(),
            Loss::Huber => {
                let a = r.abs();
                let q = a.clone().clamp_max(1.0);
                q.clone().powi_scalar(2).mul_scalar(0.5) + (a - q)
            }
        };
        per.sum()
            .div_scalar((count * self.cfg.model.outputs) as f64)
    }

    /// The gradient of the mean loss over `batch`, flattened like [`Params::flatten`] (for checks).
    fn gradient_of(&mut self, batch: &Batch) -> Vec<f32> {
        let loss = self.loss(batch, batch.len());
        let grads = GradientsParams::from_grads(loss.backward(), self.model());
        let mut out = Vec::new();
        for l in &self.model().layers {
            let w = grads
                .get::<B::InnerBackend, 2>(l.weight.id)
                .expect("weight has a gradient");
            let b = grads
                .get::<B::InnerBackend, 1>(l.bias.as_ref().unwrap().id)
                .expect("bias has a gradient");
            let host = super::model::layer_to_host(w, b);
            out.extend(host.w);
            out.extend(host.b);
        }
        out
    }

    /// Unscales the gradients in place; false when any is inf or NaN.
    fn unscale(&self, grads: &mut GradientsParams) -> bool {
        let inv = 1.0 / self.scaler.scale as f64;
        let mut finite = true;
        for l in &self.model().layers {
            finite &= unscale_one::<B::InnerBackend, 2>(grads, l.weight.id, inv);
            finite &= unscale_one::<B::InnerBackend, 1>(grads, l.bias.as_ref().unwrap().id, inv);
        }
        finite
    }
}

fn unscale_one<B: Backend, const D: usize>(
    grads: &mut GradientsParams,
    id: burn::module::ParamId,
    inv: f64,
) -> bool {
    let Some(g) = grads.remove::<B, D>(id) else {
        return true;
    };
    let g = g.mul_scalar(inv);
    let finite = g.clone().is_finite().all().into_scalar().to_bool();
    grads.register(id, g);
    finite
}

impl<B: AutodiffBackend> StepEngine for GeneralEngine<B> {
    fn accumulate(&mut self, batch: &Batch, count: usize) -> Result<()> {
        let loss = self.loss(batch, count);
        let detached = loss.clone().inner();
        self.loss_sum = Some(match self.loss_sum.take() {
            Some(s) => s + detached,
            None => detached,
        });
        let scaled = if self.scaler.enabled() {
            loss.mul_scalar(self.scaler.scale as f64)
        } else {
            loss
        };
        let grads = GradientsParams::from_grads(scaled.backward(), self.model());
        let model = self.model.take().expect("model is present");
        self.accum.accumulate(&model, grads);
        self.model = Some(model);
        Ok(())
    }

    fn apply(&mut self, lr: f64) -> Result<()> {
        let mut grads = self.accum.grads();
        let finite = !self.scaler.enabled() || self.unscale(&mut grads);
        if self.scaler.update(finite) {
            let model = self.model.take().expect("model is present");
            self.model = Some(self.optim.step(lr, model, grads));
        }
        self.last_loss = self.loss_sum.take();
        Ok(())
    }

    fn last_loss(&mut self) -> Result<f64> {
        Ok(match &self.last_loss {
            Some(t) => t.clone().into_scalar().elem::<f64>(),
            None => f64::NAN,
        })
    }

    fn sync(&mut self) -> Result<()> {
        B::sync(&self.device).map_err(|e| crate::error::FerroError::BackendFailed {
            backend: "burn".into(),
            detail: format!("{e:?}"),
        })
    }

    fn params(&mut self) -> Result<Params> {
        Ok(self.model().valid().to_params())
    }

    fn gradient(&mut self, batch: &Batch) -> Result<Vec<f32>> {
        Ok(self.gradient_of(batch))
    }

    fn skipped_steps(&self) -> usize {
        self.scaler.skipped
    }
}
