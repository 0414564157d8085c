//! The seed job's shape (1 input, one hidden layer of ReLU, 1 output, MSE) as
//! explicit AVX2+FMA code: the portable kernel ([`crate::engine::fused::cpu::kernel`]) is
//! compiled for AVX2 too, but LLVM leaves its per-lane gradient sums scalar.
//!
//! Blocks of [`BLOCK`] points (eight 8-lane vectors) stay in registers: the
//! forward pass runs over the block once per hidden unit, then the backward
//! pass sums each unit's three gradients over the block in one vector each
//! and adds them to the chunk's totals once per block. Order of every sum is
//! fixed, so results do not depend on threads; FMA rounds once where the
//! portable kernel rounds twice.

use crate::batches::Batch;
use crate::model::Params;
use crate::task::Dataset;
use std::arch::x86_64::*;

/// Points per block.
const BLOCK: usize = 64;
/// Vectors per block.
const K: usize = BLOCK / 8;

/// True when this CPU can run [`seed_relu_mse`].
pub fn available() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
}

/// Loss sum and gradient sum (flattened like [`Params::flatten`]) over batch
/// positions `first..last`, each loss derivative times `scale`.
///
/// # Safety
/// The CPU must support AVX2 and FMA ([`available`]); `params` must have the
/// seed shape (1 → H → 1).
#[target_feature(enable = "avx2,fma")]
pub unsafe fn seed_relu_mse(
    params: &Params,
    data: &Dataset,
    batch: &Batch,
    first: usize,
    last: usize,
    scale: f32,
) -> (f64, Vec<f32>) {
    let (l0, l1) = (&params.layers[0], &params.layers[1]);
    let h = l0.fan_out;
    let zero = _mm256_setzero_ps();
    let mut gw = vec![zero; h];
    let mut gb = vec![zero; h];
    let mut gv = vec![zero; h];
    let (mut gc, mut lsum) = (zero, zero);
    let (c, two_scale) = (_mm256_set1_ps(l1.b[0]), _mm256_set1_ps(2.0 * scale));
    let (mut xs, mut ys, mut ms) = ([0f32; BLOCK], [0f32; BLOCK], [0f32; BLOCK]);
    let (mut x, mut y, mut mask) = ([zero; K], [zero; K], [zero; K]);
    let mut d = [zero; K];
    let mut start = first;
    while start < last {
        let m = (last - start).min(BLOCK);
        match batch {
            Batch::Range(s, _) if m == BLOCK => {
                let (px, py) = (
                    &data.x[s + start..s + start + BLOCK],
                    &data.y[s + start..s + start + BLOCK],
                );
                for k in 0..K {
                    x[k] = _mm256_loadu_ps(px.as_ptr().add(8 * k));
                    y[k] = _mm256_loadu_ps(py.as_ptr().add(8 * k));
                    mask[k] = _mm256_set1_ps(1.0);
                }
            }
            _ => {
                // A short or gathered block goes through a zero-padded buffer.
                for l in 0..BLOCK {
                    let p = match batch {
                        _ if l >= m => None,
                        Batch::Range(s, _) => Some(s + start + l),
                        Batch::Indices(ix) => Some(ix[start + l] as usize),
                    };
                    (xs[l], ys[l], ms[l]) =
                        p.map_or((0.0, 0.0, 0.0), |p| (data.x[p], data.y[p], 1.0));
                }
                for k in 0..K {
                    x[k] = _mm256_loadu_ps(xs.as_ptr().add(8 * k));
                    y[k] = _mm256_loadu_ps(ys.as_ptr().add(8 * k));
                    mask[k] = _mm256_loadu_ps(ms.as_ptr().add(8 * k));
                }
            }
        }
        let mut out = [c; K];
        for j in 0..h {
            let (w, b, v) = (
                _mm256_set1_ps(l0.w[j]),
                _mm256_set1_ps(l0.b[j]),
                _mm256_set1_ps(l1.w[j]),
            );
            for k in 0..K {
                let a = _mm256_max_ps(_mm256_fmadd_ps(w, x[k], b), zero);
                out[k] = _mm256_fmadd_ps(v, a, out[k]);
            }
        }
        for k in 0..K {
            let r = _mm256_mul_ps(_mm256_sub_ps(out[k], y[k]), mask[k]);
            lsum = _mm256_fmadd_ps(r, r, lsum);
            d[k] = _mm256_mul_ps(r, two_scale);
            gc = _mm256_add_ps(gc, d[k]);
        }
        for j in 0..h {
            let (w, b, v) = (
                _mm256_set1_ps(l0.w[j]),
                _mm256_set1_ps(l0.b[j]),
                _mm256_set1_ps(l1.w[j]),
            );
            let (mut sw, mut sb, mut sv) = (zero, zero, zero);
            for k in 0..K {
                let z = _mm256_fmadd_ps(w, x[k], b);
                sv = _mm256_fmadd_ps(d[k], _mm256_max_ps(z, zero), sv);
                let on = _mm256_cmp_ps::<_CMP_GT_OQ>(z, zero);
                let dz = _mm256_and_ps(_mm256_mul_ps(d[k], v), on);
                sw = _mm256_fmadd_ps(dz, x[k], sw);
                sb = _mm256_add_ps(sb, dz);
            }
            gw[j] = _mm256_add_ps(gw[j], sw);
            gb[j] = _mm256_add_ps(gb[j], sb);
            gv[j] = _mm256_add_ps(gv[j], sv);
        }
        start += m;
    }
    let lanes = |v: &__m256| {
        let mut a = [0f32; 8];
        // SAFETY: `a` holds eight floats.
        unsafe { _mm256_storeu_ps(a.as_mut_ptr(), *v) };
        a.iter().sum::<f32>()
    };
    let mut grad: Vec<f32> = gw.iter().chain(&gb).chain(&gv).map(lanes).collect();
    grad.push(lanes(&gc));
    (lanes(&lsum) as f64, grad)
}
