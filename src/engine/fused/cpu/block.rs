//! One block of points through any MLP of the fused CPU engine's envelope:
//! forward, loss and backward with every activation laid out feature-major
//! (`[feature][point]`, [`BLOCK`] points), so each inner loop runs over points
//! and vectorises. [`crate::engine::fused::cpu::kernel`] runs the blocks of a chunk through one
//! [`Workspace`]; the seed job's shape takes its own faster path there.

use crate::batches::Batch;
use crate::config::Activation;
use crate::engine::fused::cpu::chunk::{Chunk, BLOCK};
use crate::engine::fused::half::hidden_to_hidden;
use crate::model::{activation, loss, Params};

/// One chunk's scratch space and running sums.
pub(crate) struct Workspace {
    /// Input of each layer, then the output: `[width][BLOCK]`.
    acts: Vec<Vec<f32>>,
    /// Pre-activation of each layer: `[fan_out][BLOCK]`.
    pres: Vec<Vec<f32>>,
    delta: Vec<f32>,
    back: Vec<f32>,
    pub(crate) grad: Vec<f32>,
    /// Offset of each layer's weights in `grad`.
    offsets: Vec<usize>,
    pub(crate) loss: f64,
}

impl Workspace {
    pub(crate) fn new(p: &Params) -> Self {
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
    #[inline(always)]
    pub(crate) fn block(&mut self, c: &Chunk, start: usize, end: usize) {
        let (p, act, lossk) = (c.params, c.act, c.lossk);
        let (data, batch, scale) = (c.data, c.batch, c.scale);
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
                    // The input of a hidden-to-hidden product: an operand.
                    if let Some(h) = c.half.filter(|_| hidden_to_hidden(li + 1, nl)) {
                        h.round_all(dst);
                    }
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
            // The δ of a hidden-to-hidden layer: an operand of its weight
            // gradient and of the δ below.
            if let Some(h) = c.half.filter(|_| hidden_to_hidden(li, nl)) {
                for o in 0..l.fan_out {
                    h.round_all(&mut self.delta[o * BLOCK..o * BLOCK + bp]);
                }
            }
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
