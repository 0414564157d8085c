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
    let partials: Vec<(f64, Vec<f32>)> = (0..chunks)
        .into_par_iter()
        .map(|c| {
            let mut ws = Workspace::new(params);
            let first = c * blocks_per_chunk * BLOCK;
            let last = ((c + 1) * blocks_per_chunk * BLOCK).min(n);
            let mut start = first;
            while start < last {
                let end = (start + BLOCK).min(last);
                ws.block(params, act, lossk, data, batch, start, end, scale);
                start = end;
            }
            (ws.loss, ws.grad)
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
        for o in 0..dout {
            for j in 0..bp {
                let t = data.y[point(start + j) * dout + o];
                let pr = pred[o * BLOCK + j];
                self.loss += loss::value(lossk, pr, t) as f64;
                self.delta[o * BLOCK + j] = loss::derivative(lossk, pr, t) * scale;
            }
        }
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
                g[l.w.len() + o] += d.iter().sum::<f32>();
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

/// Dot product with four independent accumulators (vectorises without fast-math).
#[inline]
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

#[inline]
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

#[inline]
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
