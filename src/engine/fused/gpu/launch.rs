//! The fused GPU engine's kernel launches ([`GpuFused`]'s buffers into
//! CubeCL's `launch` calls): the gradient pass (per-point or tiled), the
//! reduction and optimizer step, zeroing the carried gradient. Every gradient
//! kernel is compiled for the engine's [`Shape`] and [`Pass`].

use crate::engine::fused::gpu::kernels::args::{
    BatchLaunch, PointsLaunch, RuleLaunch, StateLaunch,
};
use crate::engine::fused::gpu::kernels::fused::{
    fused_grad, reduce_update, reduce_values, zero, CUBE_UNITS,
};
use crate::engine::fused::gpu::kernels::round::round_params;
use crate::engine::fused::gpu::kernels::tile::resident_cubes;
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
        let (b1, b2) = bias_corrections(self.step.max(1));
        let np = self.np;
        let rule = RuleLaunch::new(
            lr as f32,
            self.cfg.weight_decay as f32,
            b1,
            b2,
            u32::from(self.step == 1),
        );
        // SAFETY: every buffer was allocated with the lengths passed here.
        unsafe {
            reduce_update::launch::<f32, R>(
                &self.client,
                CubeCount::Static((np + 1).div_ceil(reduce_values(np + 1)) as u32, 1, 1),
                CubeDim::new_1d(CUBE_UNITS),
                ArrayArg::from_raw_parts(self.buf.partials.clone(), self.max_cubes * (np + 1)),
                self.state_arg(),
                ArrayArg::from_raw_parts(self.buf.carry.clone(), np + 1),
                cubes,
                rule,
                u32::from(apply),
                Shape::of(&self.cfg),
            )
        };
    }

    /// The weights, moments and loss slot as one kernel argument.
    pub(crate) fn state_arg(&self) -> StateLaunch<f32, R> {
        let np = self.np;
        // SAFETY: the buffers hold np, np + 1, np + 1 and 2 values.
        unsafe {
            StateLaunch::new(
                ArrayArg::from_raw_parts(self.buf.params.clone(), np),
                ArrayArg::from_raw_parts(self.buf.m.clone(), np + 1),
                ArrayArg::from_raw_parts(self.buf.v.clone(), np + 1),
                ArrayArg::from_raw_parts(self.buf.loss_out.clone(), 2),
            )
        }
    }

    /// The data as one kernel argument, with the micro-batch's `len` indices
    /// (a placeholder without `idx`).
    pub(crate) fn points_arg(&self, idx: Option<Handle>, len: usize) -> PointsLaunch<f32, R> {
        let (idx, idx_len) = match idx {
            Some(h) => (h, len),
            None => (self.buf.no_idx.clone(), 1),
        };
        let m = &self.cfg.model;
        // SAFETY: x and y hold n points, and `idx` holds `len` indices below `n`.
        unsafe {
            PointsLaunch::new(
                ArrayArg::from_raw_parts(self.buf.x.clone(), self.n * m.inputs),
                ArrayArg::from_raw_parts(self.buf.y.clone(), self.n * m.outputs),
                ArrayArg::from_raw_parts(idx, idx_len),
            )
        }
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

    /// Cubes of the tiled kernel for `len` points: [`TILES_PER_CUBE`] tiles
    /// each at least, and where the device says how many multiprocessors it
    /// has, no more than it holds at once (a partial last wave would leave
    /// most of them idle while it runs).
    fn tiled_cubes(&self, tile: usize, len: usize) -> usize {
        let spread = len.div_ceil(tile * TILES_PER_CUBE);
        let hw = &self.client.properties().hardware;
        let resident = hw.num_streaming_multiprocessors.map(|sms| {
            let lined = self.pass.blocks.lined;
            sms as usize
                * resident_cubes(
                    &Shape::of(&self.cfg),
                    tile,
                    hw.max_shared_memory_size,
                    lined,
                )
        });
        spread
            .min(resident.unwrap_or(usize::MAX))
            .clamp(1, self.max_cubes)
    }

    /// Reduces the partials still pending, after any queued or deferred work.
    pub(crate) fn reduce_pending(&mut self) {
        self.settle();
        if self.pending.is_some() {
            self.reduce(false, 0.0);
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
        if self.pass.tensor.is_some() {
            return self.launch_tensor(start, len, idx, scale);
        }
        // Each kernel with bounds checks, then without.
        let (cubes, units, checked, unchecked): (_, _, GradLaunch<R>, GradLaunch<R>) =
            match self.tile() {
                Some(tile) => (
                    self.tiled_cubes(tile, len),
                    self.pass.blocks.cube as u32,
                    tiled_grad::launch::<f32, R>,
                    tiled_grad::launch_unchecked::<f32, R>,
                ),
                None => (
                    len.div_ceil(
                        CUBE_UNITS as usize
                            * self.cfg.kernel.points_per_unit.unwrap_or(POINTS_PER_UNIT),
                    )
                    .clamp(1, MAX_CUBES),
                    CUBE_UNITS,
                    fused_grad::launch::<f32, R>,
                    fused_grad::launch_unchecked::<f32, R>,
                ),
            };
        let launch = if self.checked { checked } else { unchecked };
        let use_idx = idx.is_some();
        let np = self.np;
        // Emulated half precision: the products read the weights rounded.
        let weights = match self.pass.half {
            Some(half) => {
                // SAFETY: both hold np f32 values (`half` as many bytes as
                // params); the kernel writes only below np.
                unsafe {
                    round_params::launch_unchecked::<f32, R>(
                        &self.client,
                        CubeCount::Static(np.div_ceil(CUBE_UNITS as usize) as u32, 1, 1),
                        CubeDim::new_1d(CUBE_UNITS),
                        ArrayArg::from_raw_parts(self.buf.params.clone(), np),
                        ArrayArg::from_raw_parts(self.buf.half.clone(), np),
                        Shape::of(&self.cfg),
                        Some(half),
                    )
                };
                &self.buf.half
            }
            None => &self.buf.params,
        };
        // SAFETY: params holds np values, partials a row of np + 1 for each
        // of at most max_cubes cubes.
        let (params, partials) = unsafe {
            (
                ArrayArg::from_raw_parts(weights.clone(), np),
                ArrayArg::from_raw_parts(self.buf.partials.clone(), self.max_cubes * (np + 1)),
            )
        };
        // SAFETY: as above; without checks, the kernels keep every index in
        // range themselves (points past the batch are not read, block
        // indices are clamped).
        unsafe {
            launch(
                &self.client,
                CubeCount::Static(cubes as u32, 1, 1),
                CubeDim::new_1d(units),
                self.points_arg(idx, len),
                params,
                partials,
                BatchLaunch::new(start as u32, len as u32, scale),
                Shape::of(&self.cfg),
                self.pass_for(use_idx),
            )
        };
        self.pending = Some(cubes as u32);
    }
}

/// The launch function both gradient kernels have, with bounds checks or
/// without (`unsafe`).
type GradLaunch<R> = unsafe fn(
    &ComputeClient<R>,
    CubeCount,
    CubeDim,
    PointsLaunch<f32, R>,
    ArrayArg<R>,
    ArrayArg<R>,
    BatchLaunch<f32, R>,
    Shape,
    Pass,
);
