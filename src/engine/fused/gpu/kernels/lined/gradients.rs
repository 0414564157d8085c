//! The lined passes going backward: a layer's weight and bias gradients into
//! the cube's partial row, and the δ of the hidden layer below.

use super::{
    block_items, grad_items, lined_rows, weight_lines, LINE, PLANE, POINT_LANES, SIDE_LANES,
};
use crate::engine::fused::gpu::kernels::layers::{
    bias_gradients, clamp_to, hidden_rows, At, Layer,
};
use crate::engine::fused::gpu::kernels::math::act_bwd_at;
use crate::engine::fused::gpu::shape::keeps_z;
use cubecl::prelude::*;

/// Backward through the layer `at` whose inputs are a hidden layer (a
/// multiple of [`LINE`] wide), as [`crate::engine::fused::gpu::kernels::layers::backward`]
/// does it: the weight and bias gradients into the cube's partial row, and
/// with `layer.below` the δ of the layer below over its first row. δ rows
/// of a hidden layer are read a line at a time, the output δs one at a time.
#[cube]
pub fn backward<F: Float>(
    params: &Array<F>,
    buf: &mut SharedMemory<F>,
    partials: &mut Array<F>,
    row: usize,
    first: bool,
    at: &At,
    #[comptime] layer: Layer,
) {
    let (tile, in_w, out_w) = comptime!((layer.tile, layer.in_w, layer.out_w));
    let (si, so) = comptime!((layer.si, layer.so));
    // Units of a lane's weight-gradient block: a line of δ, or one δ.
    let gu = comptime!(if lined_rows(out_w, so) { LINE } else { 1 });
    let gq = comptime!((layer.blocks.grad_k / LINE).max(1));
    let unit = UNIT_POS as usize;
    let units = CUBE_DIM as usize;
    let off = at.off;
    let bv = buf
        .to_slice()
        .into_vectorized()
        .with_vector_size::<Const<4>>();
    // Weight gradients: a lane takes gu units × gq lines of inputs (8 lines
    // apart), Σ over the tile of δ·a.
    let lines = comptime!(in_w / LINE);
    let kcs = comptime!(lines.div_ceil(POINT_LANES * gq));
    let items = comptime!(grad_items(in_w, out_w, gu, gq));
    let mut m = unit;
    while m < items {
        let lane = m % PLANE;
        let g = m / PLANE;
        let q0 = (g % kcs) * comptime!(POINT_LANES * gq) + lane % POINT_LANES;
        let u0 = (g / kcs) * comptime!(SIDE_LANES * gu) + (lane / POINT_LANES) * gu;
        let uc = clamp_max(u0, comptime!(out_w - gu));
        let mut qs = Array::<usize>::new(gq);
        #[unroll]
        for j in 0..gq {
            qs[j] = clamp_to(q0 + j * POINT_LANES, lines);
        }
        let mut acc = Array::<F>::new(comptime!(gu * gq * LINE));
        #[unroll]
        for i in 0..comptime!(gu * gq * LINE) {
            acc[i] = F::new(0.0);
        }
        for t in 0..tile {
            let mut d = Array::<F>::new(gu);
            if comptime!(gu == LINE) {
                let dl = bv[(at.dst + t * so + uc) / LINE];
                #[unroll]
                for c in 0..gu {
                    d[c] = dl[c];
                }
            } else {
                d[0] = buf[at.dst + t * so + uc];
            }
            let a0 = (at.src + t * si) / LINE;
            #[unroll]
            for j in 0..gq {
                let al = bv[a0 + qs[j]];
                #[unroll]
                for c in 0..gu {
                    #[unroll]
                    for e in 0..LINE {
                        acc[(c * gq + j) * LINE + e] += d[c] * al[e];
                    }
                }
            }
        }
        #[unroll]
        for c in 0..gu {
            #[unroll]
            for j in 0..gq {
                let q = q0 + j * POINT_LANES;
                if u0 + c < out_w && q < lines {
                    let base = row + off + (u0 + c) * in_w + q * LINE;
                    #[unroll]
                    for e in 0..LINE {
                        let v = acc[(c * gq + j) * LINE + e];
                        if first {
                            partials[base + e] = v;
                        } else {
                            partials[base + e] += v;
                        }
                    }
                }
            }
        }
        m += units;
    }
    bias_gradients::<F>(buf, partials, row, first, F::new(1.0), at, layer);
    if comptime!(layer.below) {
        below::<F>(params, buf, at, layer);
    }
}

/// δ_below[t, k] = act'(z[t, k]) Σ_u w[u, k] δ[t, u] over the layer below's
/// first row (its z, or its a once every unit is past the weight gradients):
/// a lane takes `points` points (8 apart) × one line of inputs.
#[cube]
fn below<F: Float>(
    params: &Array<F>,
    buf: &mut SharedMemory<F>,
    at: &At,
    #[comptime] layer: Layer,
) {
    let (tile, in_w, out_w, act) = comptime!((layer.tile, layer.in_w, layer.out_w, layer.act));
    let bt = comptime!(layer.blocks.points);
    let (si, so) = comptime!((layer.si, layer.so));
    let pv = params
        .to_slice()
        .into_vectorized()
        .with_vector_size::<Const<4>>();
    let mut bv = buf
        .to_slice_mut()
        .into_vectorized()
        .with_vector_size::<Const<4>>();
    let zb = at.src - comptime!((hidden_rows(act) - 1) * tile * si);
    if comptime!(!keeps_z(act)) {
        sync_cube();
    }
    let chunk = comptime!(POINT_LANES * bt);
    let pcs = comptime!(tile.div_ceil(chunk));
    let items = comptime!(block_items(tile, bt, in_w));
    let mut m = UNIT_POS as usize;
    while m < items {
        let lane = m % PLANE;
        let g = m / PLANE;
        let t0 = (g % pcs) * chunk + lane % POINT_LANES;
        let k0 = (g / pcs) * comptime!(SIDE_LANES * LINE) + (lane / POINT_LANES) * LINE;
        let kc = clamp_max(k0, comptime!(in_w - LINE));
        let mut rows = Array::<usize>::new(bt);
        #[unroll]
        for r in 0..bt {
            rows[r] = at.dst + clamp_to(t0 + r * POINT_LANES, tile) * so;
        }
        let mut s = Array::<F>::new(comptime!(bt * LINE));
        #[unroll]
        for i in 0..comptime!(bt * LINE) {
            s[i] = F::new(0.0);
        }
        if comptime!(lined_rows(out_w, so)) {
            for q in 0..comptime!(out_w / LINE) {
                // w[4q + i, kc .. kc + 4]
                let mut w = Array::<F>::new(comptime!(LINE * LINE));
                let w0 = (at.off + q * comptime!(LINE * in_w) + kc) / LINE;
                weight_lines::<F>(&pv, &mut w, w0, comptime!(in_w / LINE));
                #[unroll]
                for r in 0..bt {
                    let dl = bv[rows[r] / LINE + q];
                    #[unroll]
                    for i in 0..LINE {
                        #[unroll]
                        for e in 0..LINE {
                            s[r * LINE + e] += dl[i] * w[i * LINE + e];
                        }
                    }
                }
            }
        } else {
            for u in 0..out_w {
                let wl = pv[(at.off + u * in_w + kc) / LINE];
                #[unroll]
                for r in 0..bt {
                    let d = buf[rows[r] + u];
                    #[unroll]
                    for e in 0..LINE {
                        s[r * LINE + e] += d * wl[e];
                    }
                }
            }
        }
        #[unroll]
        for r in 0..bt {
            let t = t0 + r * POINT_LANES;
            if t < tile && k0 < in_w {
                let i = (zb + t * si + k0) / LINE;
                let z = bv[i];
                let mut d = Vector::<F, Const<4>>::empty();
                #[unroll]
                for e in 0..LINE {
                    d[e] = s[r * LINE + e] * act_bwd_at::<F>(z[e], act);
                }
                bv[i] = d;
            }
        }
        m += CUBE_DIM as usize;
    }
}
