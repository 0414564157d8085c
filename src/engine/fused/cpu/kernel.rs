//! The fused CPU training step: forward, loss and backward for a batch of points
//! in one pass, without materialising any whole-batch intermediate.
//!
//! Points are processed in blocks of [`BLOCK`] laid out feature-major ([`crate::engine::fused::cpu::block`])
//! (`[feature][point]`), so every inner loop runs over points and vectorises.
//! Blocks are grouped into a fixed number of chunks that depends only on the
//! batch size; rayon runs the chunks on all cores, and the per-chunk gradients
//! are summed in chunk order in f64, so results do not depend on the thread count.

use crate::batches::Batch;
use crate::config::{Activation, Loss};
use crate::engine::fused::cpu::block::Workspace;
use crate::engine::fused::cpu::chunk::{Chunk, BLOCK};
use crate::engine::fused::half::Half;
use crate::model::{activation, loss, Params};
use crate::task::Dataset;
use rayon::prelude::*;

/// Points per block of the seed-shape path ([`Chunk::run_single`]).
const SINGLE_BLOCK: usize = 64;
/// Partial sums per accumulator there (one 8-wide vector).
const LANES: usize = 8;
/// Upper bound on the number of chunks (parallel tasks) per batch.
const MAX_CHUNKS: usize = 256;
/// Smallest number of points a chunk is worth.
const MIN_CHUNK_POINTS: usize = 4096;

/// Sum of the loss over a batch and the sum of its gradient (flattened like
/// [`Params::flatten`]); `scale` multiplies every loss derivative (1/count
/// normalises to a mean, a loss scale multiplies on top). With `half`, the
/// hidden-to-hidden products take operands of that type ([`Half`]; `params`
/// already rounded, [`Half::operands`]; one hidden layer has none, so its
/// paths need no rounding), and `scale` multiplies the sums at the end
/// instead, so no δ is too small for f16.
pub fn loss_and_grad(
    params: &Params,
    act: Activation,
    lossk: Loss,
    data: &Dataset,
    batch: &Batch,
    scale: f32,
    half: Option<Half>,
) -> (f64, Vec<f64>) {
    let (step_scale, end_scale) = match half {
        None => (scale, 1.0),
        Some(_) => (1.0, f64::from(scale)),
    };
    let n = batch.len();
    let blocks = n.div_ceil(BLOCK);
    let chunks = (n / MIN_CHUNK_POINTS)
        .clamp(1, MAX_CHUNKS)
        .min(blocks.max(1));
    let blocks_per_chunk = blocks.div_ceil(chunks);
    let l = &params.layers;
    let seed_relu_mse = l.len() == 2
        && l[0].fan_in == 1
        && l[1].fan_out == 1
        && act == Activation::Relu
        && lossk == Loss::Mse;
    let partials: Vec<(f64, Vec<f32>)> = (0..chunks)
        .into_par_iter()
        .map(|c| {
            let job = Chunk {
                params,
                act,
                lossk,
                data,
                batch,
                scale: step_scale,
                half,
                first: c * blocks_per_chunk * BLOCK,
                last: ((c + 1) * blocks_per_chunk * BLOCK).min(n),
            };
            #[cfg(target_arch = "x86_64")]
            if seed_relu_mse && crate::engine::fused::cpu::simd::available() {
                // SAFETY: AVX2 and FMA were detected; the shape was checked above.
                return unsafe {
                    crate::engine::fused::cpu::simd::seed_relu_mse(
                        params, data, batch, job.first, job.last, step_scale,
                    )
                };
            }
            #[cfg(target_arch = "x86_64")]
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2, checked just above.
                return unsafe { job.run_avx2() };
            }
            job.run()
        })
        .collect();
    let mut grad = vec![0f64; params.len()];
    let mut total = 0f64;
    for (l, g) in partials {
        total += l;
        for (acc, v) in grad.iter_mut().zip(g) {
            *acc += v as f64;
        }
    }
    if end_scale != 1.0 {
        grad.iter_mut().for_each(|v| *v *= end_scale);
    }
    (total, grad)
}

impl Chunk<'_> {
    /// The chunk's loss sum and gradient sum.
    #[inline(always)]
    fn run(&self) -> (f64, Vec<f32>) {
        let l = &self.params.layers;
        if l.len() == 2 && l[0].fan_in == 1 && l[1].fan_out == 1 {
            return match self.act {
                Activation::Relu => self.run_single(|z| z.max(0.0), |z| f32::from(z > 0.0)),
                a => self.run_single(
                    |z| activation::apply(a, z),
                    |z| activation::derivative(a, z),
                ),
            };
        }
        let mut ws = Workspace::new(self.params);
        let mut start = self.first;
        while start < self.last {
            let end = (start + BLOCK).min(self.last);
            ws.block(self, start, end);
            start = end;
        }
        (ws.loss, ws.grad)
    }

    /// The seed job's shape (1 input, one hidden layer, 1 output). Blocks of
    /// [`SINGLE_BLOCK`] points: the forward pass runs over the block once per
    /// hidden unit, then the backward pass sums each unit's three gradients
    /// over the block in registers ([`LANES`] partial sums each) and adds them
    /// to the chunk's totals once per block. Nothing but the block's inputs,
    /// outputs and loss derivatives goes through memory.
    #[inline(always)]
    fn run_single(&self, act: impl Fn(f32) -> f32, dact: impl Fn(f32) -> f32) -> (f64, Vec<f32>) {
        const B: usize = SINGLE_BLOCK;
        const V: usize = LANES;
        let (l0, l1) = (&self.params.layers[0], &self.params.layers[1]);
        let h = l0.fan_out;
        let (w, b, v, c) = (&l0.w[..h], &l0.b[..h], &l1.w[..h], l1.b[0]);
        let mut gw = vec![[0f32; V]; h];
        let mut gb = vec![[0f32; V]; h];
        let mut gv = vec![[0f32; V]; h];
        let (mut gc, mut lsum) = ([0f32; V], [0f32; V]);
        let (mut x, mut y, mut mask) = ([0f32; B], [0f32; B], [1f32; B]);
        let mut d = [0f32; B];
        let mut start = self.first;
        while start < self.last {
            let m = (self.last - start).min(B);
            match self.batch {
                Batch::Range(s, _) if m == B => {
                    x.copy_from_slice(&self.data.x[s + start..s + start + B]);
                    y.copy_from_slice(&self.data.y[s + start..s + start + B]);
                }
                Batch::Range(s, _) => {
                    x = [0f32; B];
                    y = [0f32; B];
                    x[..m].copy_from_slice(&self.data.x[s + start..s + start + m]);
                    y[..m].copy_from_slice(&self.data.y[s + start..s + start + m]);
                }
                Batch::Indices(ix) => {
                    for (l, &p) in ix[start..start + m].iter().enumerate() {
                        x[l] = self.data.x[p as usize];
                        y[l] = self.data.y[p as usize];
                    }
                }
            }
            if m < B {
                mask = [0f32; B];
                mask[..m].fill(1.0);
            }
            let mut out = [c; B];
            for j in 0..h {
                let (wj, bj, vj) = (w[j], b[j], v[j]);
                for l in 0..B {
                    out[l] += vj * act(wj * x[l] + bj);
                }
            }
            if self.lossk == Loss::Mse {
                for k in 0..B / V {
                    for q in 0..V {
                        let l = k * V + q;
                        let r = (out[l] - y[l]) * mask[l];
                        lsum[q] += r * r;
                        d[l] = 2.0 * r * self.scale;
                        gc[q] += d[l];
                    }
                }
            } else {
                for k in 0..B / V {
                    for q in 0..V {
                        let l = k * V + q;
                        lsum[q] += mask[l] * loss::value(self.lossk, out[l], y[l]);
                        d[l] = mask[l] * loss::derivative(self.lossk, out[l], y[l]) * self.scale;
                        gc[q] += d[l];
                    }
                }
            }
            for j in 0..h {
                let (wj, bj, vj) = (w[j], b[j], v[j]);
                let (mut sw, mut sb, mut sv) = ([0f32; V], [0f32; V], [0f32; V]);
                for k in 0..B / V {
                    for q in 0..V {
                        let l = k * V + q;
                        let z = wj * x[l] + bj;
                        sv[q] += d[l] * act(z);
                        let dz = d[l] * vj * dact(z);
                        sw[q] += dz * x[l];
                        sb[q] += dz;
                    }
                }
                for q in 0..V {
                    gw[j][q] += sw[q];
                    gb[j][q] += sb[q];
                    gv[j][q] += sv[q];
                }
            }
            start += m;
        }
        let lanes = |a: &[f32; V]| a.iter().sum::<f32>();
        let mut grad: Vec<f32> = gw.iter().chain(&gb).chain(&gv).map(lanes).collect();
        grad.push(lanes(&gc));
        (lanes(&lsum) as f64, grad)
    }

    /// [`Chunk::run`] compiled for AVX2 (8-wide vectors), chosen at run time.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn run_avx2(&self) -> (f64, Vec<f32>) {
        self.run()
    }
}
