//! The lined passes' products going forward: a hidden layer over the tile,
//! and the output layer's dot products a point at a time.

use super::{block_items, lined_rows, weight_lines, LINE, PLANE, POINT_LANES, SIDE_LANES};
use crate::engine::fused::gpu::kernels::layers::{clamp_to, At, Layer};
use crate::engine::fused::gpu::kernels::math::act_fwd;
use crate::engine::fused::gpu::shape::keeps_z;
use cubecl::prelude::*;

/// A hidden layer (`layer.out_w` a multiple of [`LINE`]) over the tile: its
/// rows at `at.dst` (act(z), after z where kept). A lane takes `points`
/// points (8 apart) × one line of units; inputs of a multiple of [`LINE`]
/// are read a line at a time, others (the first layer's) one at a time.
#[cube]
pub fn forward<F: Float>(
    params: &Array<F>,
    buf: &mut SharedMemory<F>,
    at: &At,
    #[comptime] layer: Layer,
) {
    let (tile, in_w, out_w, act) = comptime!((layer.tile, layer.in_w, layer.out_w, layer.act));
    let bt = comptime!(layer.blocks.points);
    let (si, so) = comptime!((layer.si, layer.so));
    let chunk = comptime!(POINT_LANES * bt);
    let pcs = comptime!(tile.div_ceil(chunk));
    let items = comptime!(block_items(tile, bt, out_w));
    let pv = params
        .to_slice()
        .into_vectorized()
        .with_vector_size::<Const<4>>();
    let mut bv = buf
        .to_slice_mut()
        .into_vectorized()
        .with_vector_size::<Const<4>>();
    let off = at.off;
    let mut m = UNIT_POS as usize;
    while m < items {
        let lane = m % PLANE;
        let g = m / PLANE;
        let t0 = (g % pcs) * chunk + lane % POINT_LANES;
        let u0 = (g / pcs) * comptime!(SIDE_LANES * LINE) + (lane / POINT_LANES) * LINE;
        let uc = clamp_max(u0, comptime!(out_w - LINE));
        let mut acc = Array::<F>::new(comptime!(bt * LINE));
        #[unroll]
        for c in 0..LINE {
            let bias = params[off + comptime!(out_w * in_w) + uc + c];
            #[unroll]
            for r in 0..bt {
                acc[r * LINE + c] = bias;
            }
        }
        if comptime!(lined_rows(in_w, si)) {
            let mut rows = Array::<usize>::new(bt);
            #[unroll]
            for r in 0..bt {
                rows[r] = (at.src + clamp_to(t0 + r * POINT_LANES, tile) * si) / LINE;
            }
            let w0 = (off + uc * in_w) / LINE;
            for q in 0..comptime!(in_w / LINE) {
                let mut w = Array::<F>::new(comptime!(LINE * LINE));
                weight_lines::<F>(&pv, &mut w, w0 + q, comptime!(in_w / LINE));
                #[unroll]
                for r in 0..bt {
                    let al = bv[rows[r] + q];
                    #[unroll]
                    for c in 0..LINE {
                        #[unroll]
                        for j in 0..LINE {
                            acc[r * LINE + c] += al[j] * w[c * LINE + j];
                        }
                    }
                }
            }
        } else {
            let mut rows = Array::<usize>::new(bt);
            #[unroll]
            for r in 0..bt {
                rows[r] = at.src + clamp_to(t0 + r * POINT_LANES, tile) * si;
            }
            for k in 0..in_w {
                #[unroll]
                for c in 0..LINE {
                    let w = params[off + (uc + c) * in_w + k];
                    #[unroll]
                    for r in 0..bt {
                        acc[r * LINE + c] += buf[rows[r] + k] * w;
                    }
                }
            }
        }
        #[unroll]
        for r in 0..bt {
            let t = t0 + r * POINT_LANES;
            if t < tile && u0 < out_w {
                let i = (at.dst + t * so + u0) / LINE;
                let mut a = Vector::<F, Const<4>>::empty();
                let mut z = Vector::<F, Const<4>>::empty();
                #[unroll]
                for c in 0..LINE {
                    z[c] = acc[r * LINE + c];
                    a[c] = act_fwd::<F>(acc[r * LINE + c], act);
                }
                if comptime!(keeps_z(act)) {
                    bv[i] = z;
                    bv[i + comptime!(tile * so / LINE)] = a;
                } else {
                    bv[i] = a;
                }
            }
        }
        m += CUBE_DIM as usize;
    }
}

/// b_u + Σ_k w[u, k]·a[t, k] for point `t` and output `u` of the layer `at`
/// (its inputs a multiple of [`LINE`]).
#[cube]
pub fn dense<F: Float>(
    params: &Array<F>,
    buf: &SharedMemory<F>,
    at: &At,
    t: usize,
    u: usize,
    #[comptime] layer: Layer,
) -> F {
    let in_w = comptime!(layer.in_w);
    let pv = params
        .to_slice()
        .into_vectorized()
        .with_vector_size::<Const<4>>();
    let bv = buf
        .to_slice()
        .into_vectorized()
        .with_vector_size::<Const<4>>();
    let src = (at.src + t * comptime!(layer.si)) / LINE;
    let w0 = (at.off + u * in_w) / LINE;
    let mut z = params[at.off + comptime!(layer.out_w * in_w) + u];
    for q in 0..comptime!(in_w / LINE) {
        let al = bv[src + q];
        let wl = pv[w0 + q];
        #[unroll]
        for j in 0..LINE {
            z += al[j] * wl[j];
        }
    }
    z
}
