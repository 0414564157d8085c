//! Optimizers over a flat f32 parameter vector, with the same update rules as
//! Burn's (and PyTorch's): SGD and Adam add `weight_decay·p` to the gradient,
//! momentum is 0.9 without dampening, AdamW decays the weights directly.

use crate::config::OptimizerKind;

/// Adam's β1, β2 and ε (PyTorch's defaults), shared with the general engine.
pub const BETA1: f32 = 0.9;
/// Adam's β2.
pub const BETA2: f32 = 0.999;
/// Adam's ε.
pub const EPSILON: f32 = 1e-8;
/// Momentum factor of `--optimizer momentum`.
pub const MOMENTUM: f32 = 0.9;

/// Adam's bias corrections `(1 - β1^t, 1 - β2^t)` after step `t` (from 1).
pub fn bias_corrections(t: i32) -> (f32, f32) {
    (1.0 - BETA1.powi(t), 1.0 - BETA2.powi(t))
}

/// Optimizer state for `n` parameters.
#[derive(Clone, Debug)]
pub struct FlatOptimizer {
    kind: OptimizerKind,
    weight_decay: f32,
    m: Vec<f32>,
    v: Vec<f32>,
    t: i32,
}

impl FlatOptimizer {
    /// A fresh optimizer; created once per run.
    pub fn new(kind: OptimizerKind, weight_decay: f64, n: usize) -> Self {
        let (m, v) = match kind {
            OptimizerKind::Sgd => (vec![], vec![]),
            OptimizerKind::Momentum => (vec![0.0; n], vec![]),
            OptimizerKind::Adam | OptimizerKind::Adamw => (vec![0.0; n], vec![0.0; n]),
        };
        FlatOptimizer {
            kind,
            weight_decay: weight_decay as f32,
            m,
            v,
            t: 0,
        }
    }

    /// The state, for checkpoints.
    pub fn state(&self) -> crate::engine::checkpoint::OptState {
        crate::engine::checkpoint::OptState {
            m: self.m.clone(),
            v: self.v.clone(),
            t: self.t,
        }
    }

    /// Restores a state from [`FlatOptimizer::state`] of the same optimizer and size.
    pub fn load(&mut self, s: &crate::engine::checkpoint::OptState) -> crate::Result<()> {
        // SGD keeps no state: whatever a checkpoint carries for it is ignored.
        if self.kind == OptimizerKind::Sgd {
            self.t = s.t;
            return Ok(());
        }
        if s.m.len() != self.m.len() || (!self.v.is_empty() && s.v.len() != self.v.len()) {
            return Err(crate::FerroError::File {
                path: "checkpoint".into(),
                detail: "its optimizer state does not fit this optimizer and model".into(),
            });
        }
        self.m.clone_from(&s.m);
        if !self.v.is_empty() {
            self.v.clone_from(&s.v);
        }
        self.t = s.t;
        Ok(())
    }

    /// One update of `p` with gradient `g` at learning rate `lr`.
    pub fn step(&mut self, p: &mut [f32], g: &[f32], lr: f64) {
        let lr = lr as f32;
        let wd = self.weight_decay;
        self.t += 1;
        match self.kind {
            OptimizerKind::Sgd => {
                for (p, g) in p.iter_mut().zip(g) {
                    *p -= lr * (g + wd * *p);
                }
            }
            OptimizerKind::Momentum => {
                let first = self.t == 1;
                for ((p, g), m) in p.iter_mut().zip(g).zip(&mut self.m) {
                    let g = g + wd * *p;
                    *m = if first { g } else { MOMENTUM * *m + g };
                    *p -= lr * *m;
                }
            }
            OptimizerKind::Adam | OptimizerKind::Adamw => {
                let decoupled = self.kind == OptimizerKind::Adamw;
                let (c1, c2) = bias_corrections(self.t);
                for (((p, g), m), v) in p.iter_mut().zip(g).zip(&mut self.m).zip(&mut self.v) {
                    let g = if decoupled { *g } else { g + wd * *p };
                    *m = BETA1 * *m + (1.0 - BETA1) * g;
                    *v = BETA2 * *v + (1.0 - BETA2) * g * g;
                    let update = (*m / c1) / ((*v / c2).sqrt() + EPSILON);
                    if decoupled {
                        *p *= 1.0 - lr * wd;
                    }
                    *p -= lr * update;
                }
            }
        }
    }
}
