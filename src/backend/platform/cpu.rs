//! The CPU: Burn's `flex` backend for the general engine, the Rust fused kernels.

use super::{Host, Platform, Target};
use crate::config::TrainConfig;
use crate::engine::fused::cpu::CpuFused;
use crate::engine::fused::envelope;
use crate::engine::{FlatEngine, StepEngine};
use crate::error::Result;
use crate::model::Params;
use crate::task::Dataset;

/// The CPU platform (Burn's flex backend, the fused CPU kernel).
pub struct Cpu;

impl Platform for Cpu {
    fn general(
        &self,
        _: &Target,
        cfg: &TrainConfig,
        init: &Params,
        host: Option<&Dataset>,
    ) -> Result<Box<dyn StepEngine>> {
        type B = burn::backend::Autodiff<Host>;
        super::general_on::<B>(cfg, init, host, &Default::default())
    }

    fn fused(
        &self,
        _: &Target,
        cfg: &TrainConfig,
        data: Dataset,
        init: Params,
    ) -> Result<Box<dyn FlatEngine>> {
        Ok(Box::new(CpuFused::new(cfg, data, init)))
    }

    fn fits(&self, _: &Target, cfg: &TrainConfig) -> Result<()> {
        envelope::check(cfg)
    }
}
