//! The fused CPU training step: forward, loss and backward for a batch of points
//! in one pass, without materialising any whole-batch intermediate.
//!
//! Points are processed in blocks of [`BLOCK`] laid out feature-major
//! (`[feature][point]`), so every inner loop runs over points and vectorises.
//! Blocks are grouped into a fixed number of chunks that depends only on the
//! batch size; rayon runs the chunks on all cores, and the per-chunk gradients
//! are summed in chunk order in f64, so results do not depend on the thread count.

use crate::batches::Batch;
use crate::config::{Activation, Loss};
use crate::model::{activation, loss, Params};
use crate::task::Dataset;
use rayon::prelude::*;

/// Points per block (the vector loop length).
pub const BLOCK: usize = 64;
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
/// normalises to a mean, a loss scale multiplies on top).
pub fn loss_and_grad(
    params: &Params,
    act: Activation,
    lossk: Loss,
    data: &Dataset,
    batch: &Batch,
    scale: f32,
) -> (f64, Vec<f64>) {
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
                scale,
                first: c * blocks_per_chunk * BLOCK,
                last: ((c + 1) * blocks_per_chunk * BLOCK).min(n),
            };
            #[cfg(target_arch = "x86_64")]
            if seed_relu_mse && super::cpu_simd::available() {
                // SAFETY: AVX2 and FMA were detected; the shape was checked above.
                return unsafe {
                    super::cpu_simd::seed_relu_mse(params, data, batch, job.first, job.last, scale)
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
    (total, grad)
}

/// One parallel task: a contiguous range of the batch.
struct Chunk<'a> {
    params: &'a Params,
    act: Activation,
    lossk: Loss,
    data: &'a Dataset,
    batch: &'a Batch,
    scale: f32,
    first: usize,
    last: usize,
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
            ws.block(
                self.params,
                self.act,
                self.lossk,
                self.data,
                self.batch,
                start,
                end,
                self.scale,
            );
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

/// One chunk's scratch space and running sums.
struct Workspace {
    /// Input of each layer, then the output: `[width][BLOCK]`.
    acts: Vec<Vec<f32>>,
    /// Pre-activation of each layer: `[fan_out][BLOCK]`.
    pres: Vec<Vec<f32>>,
    delta: Vec<f32>,
    back: Vec<f32>,
    grad: Vec<f32>,
    /// Offset of each layer's weights in `grad`.
    offsets: Vec<usize>,
    loss: f64,
}

impl Workspace {
    fn new(p: &Params) -> Self {
        let mut acts = vec![vec![0.0; p.layers[0].fan_in * BLOCK]];
        let mut offsets = Vec::new();
        let mut at = 0;
        for l in &p.layers {
            acts.push(vec![0.0; l.fan_out * BLOCK]);
            offsets.push(at);
            at += l.w.len() + l.b.len();
        }
        let widest = p
            .layers
            .iter()
            .map(|l| l.fan_in.max(l.fan_out))
            .max()
            .unwrap_or(1);
        Workspace {
            pres: p
                .layers
                .iter()
                .map(|l| vec![0.0; l.fan_out * BLOCK])
                .collect(),
            acts,
            delta: vec![0.0; widest * BLOCK],
            back: vec![0.0; widest * BLOCK],
            grad: vec![0.0; at],
            offsets,
            loss: 0.0,
        }
    }

    /// Points `start..end` (positions in the batch) through forward and backward.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn block(
        &mut self,
        p: &Params,
        act: Activation,
        lossk: Loss,
        data: &Dataset,
        batch: &Batch,
        start: usize,
        end: usize,
        scale: f32,
    ) {
        let bp = end - start;
        let point = |j: usize| match batch {
            Batch::Range(s, _) => s + j,
            Batch::Indices(v) => v[j] as usize,
        };
        // Gather inputs feature-major.
        let din = data.inputs;
        for j in 0..bp {
            let idx = point(start + j);
            for i in 0..din {
                self.acts[0][i * BLOCK + j] = data.x[idx * din + i];
            }
        }
        // Forward.
        let nl = p.layers.len();
        for (li, l) in p.layers.iter().enumerate() {
            let (lo, hi) = self.acts.split_at_mut(li + 1);
            let (input, out) = (&lo[li], &mut hi[0]);
            let pre = &mut self.pres[li];
            for o in 0..l.fan_out {
                let z = &mut pre[o * BLOCK..o * BLOCK + bp];
                z.fill(l.b[o]);
                for i in 0..l.fan_in {
                    let w = l.w[o * l.fan_in + i];
                    let a = &input[i * BLOCK..i * BLOCK + bp];
                    for (z, a) in z.iter_mut().zip(a) {
                        *z += w * a;
                    }
                }
                let dst = &mut out[o * BLOCK..o * BLOCK + bp];
                if li + 1 == nl {
                    dst.copy_from_slice(z);
                } else {
                    apply_activation(act, z, dst);
                }
            }
        }
        // Loss and its derivative.
        let dout = data.outputs;
        let pred = &self.acts[nl];
        let mut block_loss = 0f32;
        for o in 0..dout {
            let t = &mut self.back[..bp];
            for (j, t) in t.iter_mut().enumerate() {
                *t = data.y[point(start + j) * dout + o];
            }
            let (pr, d) = (
                &pred[o * BLOCK..o * BLOCK + bp],
                &mut self.delta[o * BLOCK..o * BLOCK + bp],
            );
            for ((d, &pr), &t) in d.iter_mut().zip(pr).zip(t.iter()) {
                *d = loss::derivative(lossk, pr, t) * scale;
            }
            for (&pr, &t) in pr.iter().zip(t.iter()) {
                block_loss += loss::value(lossk, pr, t);
            }
        }
        self.loss += block_loss as f64;
        // Backward.
        for li in (0..nl).rev() {
            let l = &p.layers[li];
            let input = &self.acts[li];
            let g = &mut self.grad[self.offsets[li]..];
            for o in 0..l.fan_out {
                let d = &self.delta[o * BLOCK..o * BLOCK + bp];
                for i in 0..l.fan_in {
                    let a = &input[i * BLOCK..i * BLOCK + bp];
                    g[o * l.fan_in + i] += dot(d, a);
                }
                g[l.w.len() + o] += sum(d);
            }
            if li == 0 {
                break;
            }
            let pre = &self.pres[li - 1];
            for i in 0..l.fan_in {
                let row = &mut self.back[i * BLOCK..i * BLOCK + bp];
                row.fill(0.0);
                for o in 0..l.fan_out {
                    let w = l.w[o * l.fan_in + i];
                    let d = &self.delta[o * BLOCK..o * BLOCK + bp];
                    for (r, d) in row.iter_mut().zip(d) {
                        *r += w * d;
                    }
                }
                let z = &pre[i * BLOCK..i * BLOCK + bp];
                scale_by_derivative(act, row, z);
            }
            std::mem::swap(&mut self.delta, &mut self.back);
        }
    }
}

/// Dot product with eight independent accumulators (vectorises without fast-math).
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

/// Sum with eight independent accumulators.
#[inline(always)]
fn sum(a: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let c = a.chunks_exact(8);
    let r = c.remainder();
    for x in c {
        for k in 0..8 {
            acc[k] += x[k];
        }
    }
    acc.iter().sum::<f32>() + r.iter().sum::<f32>()
}

#[inline(always)]
fn apply_activation(act: Activation, z: &[f32], out: &mut [f32]) {
    if act == Activation::Relu {
        for (o, z) in out.iter_mut().zip(z) {
            *o = z.max(0.0);
        }
    } else {
        for (o, &z) in out.iter_mut().zip(z) {
            *o = activation::apply(act, z);
        }
    }
}

#[inline(always)]
fn scale_by_derivative(act: Activation, row: &mut [f32], z: &[f32]) {
    if act == Activation::Relu {
        for (r, z) in row.iter_mut().zip(z) {
            *r = if *z > 0.0 { *r } else { 0.0 };
        }
    } else {
        for (r, &z) in row.iter_mut().zip(z) {
            *r *= activation::derivative(act, z);
        }
    }
}
