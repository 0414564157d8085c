//! The fused GPU engine's kernel launches ([`GpuFused`]'s buffers into
//! CubeCL's `launch` calls): the gradient pass (per-point or tiled), the
//! reduction and optimizer step, zeroing the carried gradient. Every gradient
//! kernel is compiled for the engine's [`Shape`] and [`Pass`].

use crate::engine::fused::gpu::kernels::fused::{fused_grad, reduce_update, zero, CUBE_UNITS};
use crate::engine::fused::gpu::kernels::tiled::tiled_grad;
use crate::engine::fused::gpu::shape::{Pass, Shape};
use crate::engine::fused::gpu::{GpuFused, MAX_CUBES, POINTS_PER_UNIT};
use crate::engine::fused::optim::bias_corrections;
use cubecl::prelude::*;
use cubecl::server::Handle;

/// Tiles each cube of the tiled kernel takes, at least, before more cubes are launched.
const TILES_PER_CUBE: usize = 4;

impl<R: Runtime> GpuFused<R> {
    /// Reduces pending partials; with `apply`, also steps the optimizer.
    pub(crate) fn reduce(&mut self, apply: bool, lr: f64) {
        self.settle();
        let cubes = self.pending.take().unwrap_or(0);
        let wd = self.cfg.weight_decay as f32;
        let (b1, b2) = bias_corrections(self.step.max(1));
        let np = self.np;
        // SAFETY: every buffer was allocated with the lengths passed here.
        unsafe {
            reduce_update::launch::<f32, R>(
                &self.client,
                CubeCount::Static((np + 1).div_ceil(CUBE_UNITS as usize) as u32, 1, 1),
                CubeDim::new_1d(CUBE_UNITS),
                ArrayArg::from_raw_parts(self.buf.partials.clone(), self.max_cubes * (np + 1)),
                ArrayArg::from_raw_parts(self.buf.params.clone(), np),
                ArrayArg::from_raw_parts(self.buf.m.clone(), np + 1),
                ArrayArg::from_raw_parts(self.buf.v.clone(), np + 1),
                ArrayArg::from_raw_parts(self.buf.carry.clone(), np + 1),
                ArrayArg::from_raw_parts(self.buf.loss_out.clone(), 1),
                cubes,
                lr as f32,
                wd,
                b1,
                b2,
                u32::from(self.step == 1),
                np,
                self.cfg.optimizer,
                u32::from(apply),
            )
        };
    }

    /// How this engine's kernels run a pass, over an index list or not.
    pub(crate) fn pass_for(&self, use_idx: bool) -> Pass {
        Pass {
            use_idx,
            ..self.pass
        }
    }

    /// Points a tile when the model takes the tiled kernel.
    pub(crate) fn tile(&self) -> Option<usize> {
        (self.pass.tile > 0).then_some(self.pass.tile)
    }

    /// Zeroes the carried gradient in place. A fresh buffer a step (as
    /// before) coincided with a stall at step 32 of data-parallel runs.
    pub(crate) fn zero_carry(&mut self) {
        let len = self.np + 1;
        // SAFETY: the carry holds np + 1 values.
        unsafe {
            zero::launch::<f32, R>(
                &self.client,
                CubeCount::Static(len.div_ceil(CUBE_UNITS as usize) as u32, 1, 1),
                CubeDim::new_1d(CUBE_UNITS),
                ArrayArg::from_raw_parts(self.buf.carry.clone(), len),
            )
        };
    }

    /// Reduces the partials still pending, after any queued or deferred work.
    pub(crate) fn reduce_pending(&mut self) {
        self.settle();
        if self.pending.is_some() {
            self.reduce(false, 0.0);
        }
    }

    /// The buffers both gradient kernels start with: inputs, targets, the
    /// micro-batch's `len` indices (a placeholder without `idx`), the weights
    /// and the partial rows.
    pub(crate) fn grad_buffers(&self, idx: Option<Handle>, len: usize) -> [ArrayArg<R>; 5] {
        let (idx, idx_len) = match idx {
            Some(h) => (h, len),
            None => (self.buf.no_idx.clone(), 1),
        };
        let m = &self.cfg.model;
        // SAFETY: each buffer was allocated with (at least) the length given
        // here, and `idx` holds `len` indices below `n`.
        unsafe {
            [
                ArrayArg::from_raw_parts(self.buf.x.clone(), self.n * m.inputs),
                ArrayArg::from_raw_parts(self.buf.y.clone(), self.n * m.outputs),
                ArrayArg::from_raw_parts(idx, idx_len),
                ArrayArg::from_raw_parts(self.buf.params.clone(), self.np),
                ArrayArg::from_raw_parts(self.buf.partials.clone(), self.max_cubes * (self.np + 1)),
            ]
        }
    }

    /// The gradient pass over `len` points from `start` (or the points in
    /// `idx`): `tiled_grad` a tile at a time when the model takes the tiled
    /// kernel, else `fused_grad`. Both kernels take the same arguments.
    pub(crate) fn launch_grad(
        &mut self,
        start: usize,
        len: usize,
        idx: Option<Handle>,
        scale: f32,
    ) {
        let (cubes, launch) = match self.tile() {
            Some(tile) => (
                len.div_ceil(tile * TILES_PER_CUBE).clamp(1, self.max_cubes),
                tiled_grad::launch::<f32, R> as GradLaunch<R>,
            ),
            None => (
                len.div_ceil(
                    CUBE_UNITS as usize
                        * self.cfg.kernel.points_per_unit.unwrap_or(POINTS_PER_UNIT),
                )
                .clamp(1, MAX_CUBES),
                fused_grad::launch::<f32, R> as GradLaunch<R>,
            ),
        };
        let use_idx = idx.is_some();
        let [x, y, idx, params, partials] = self.grad_buffers(idx, len);
        launch(
            &self.client,
            CubeCount::Static(cubes as u32, 1, 1),
            CubeDim::new_1d(CUBE_UNITS),
            x,
            y,
            idx,
            params,
            partials,
            start as u32,
            len as u32,
            scale,
            Shape::of(&self.cfg),
            self.pass_for(use_idx),
        );
        self.pending = Some(cubes as u32);
    }
}

/// The launch function both gradient kernels have.
type GradLaunch<R> = fn(
    &ComputeClient<R>,
    CubeCount,
    CubeDim,
    ArrayArg<R>,
    ArrayArg<R>,
    ArrayArg<R>,
    ArrayArg<R>,
    ArrayArg<R>,
    u32,
    u32,
    f32,
    Shape,
    Pass,
);
