//! The tiled kernel's layer passes with 16-byte loads, for hidden layers of
//! a multiple of [`LINE`] units on CUDA (the scalar passes are
//! [`crate::engine::fused::gpu::kernels::layers`]).
//!
//! Shared memory serves a plane one 128-byte wavefront a cycle, and the
//! scalar passes spend a wavefront on every value a lane loads: one point's
//! value for each of a block's points, one weight for each of its units, for
//! ≈ 2.7 multiply-adds a wavefront where the multiprocessor does four times
//! as many multiply-adds a cycle as it reads wavefronts. Here a lane loads
//! four values of a row at a time (a [`LINE`]), and a plane's lanes form a
//! grid — 8 lanes of points × 4 lanes of units (forward, δ) or of inputs
//! (weight gradients) — so the lanes of one side read the same line, and a
//! load of 8 points' lines fills one wavefront: 12 loads for 128
//! multiply-adds. Rows are [`line_stride`] values apart (4 × an odd number),
//! so the 8 points of a load fall in 8 different groups of banks.
//!
//! Loads go through views with a vector size, which CubeCL compiles only in
//! unchecked launches and not for WGSL: the engine takes this path only on
//! CUDA without bounds checks.

use crate::engine::fused::gpu::kernels::layers::{clamp_to, hidden_rows, At, Layer};
use crate::engine::fused::gpu::kernels::math::{act_bwd_at, act_fwd};
use crate::engine::fused::gpu::shape::keeps_z;
use cubecl::prelude::*;

/// Values a load takes: four f32s, 16 bytes.
pub const LINE: usize = 4;

/// Lanes of a plane along the points of a block grid.
const POINT_LANES: usize = 8;

/// Lanes of a plane along its units (forward), inputs (δ) or units (weight
/// gradients): a plane is [`POINT_LANES`] × this.
const SIDE_LANES: usize = 4;

/// Units a plane of lanes makes.
const PLANE: usize = POINT_LANES * SIDE_LANES;

/// Row stride of a lined layer `width` wide (a multiple of [`LINE`]): four
/// times an odd number, so rows of neighbouring points start in different
/// groups of four banks.
pub fn line_stride(width: usize) -> usize {
    LINE * (width.div_ceil(LINE) | 1)
}

/// Whether rows `width` wide, `stride` apart, are read a line at a time
/// (hidden rows; the output δs' odd stride is not).
fn lined_rows(width: usize, stride: usize) -> bool {
    width.is_multiple_of(LINE) && stride.is_multiple_of(LINE)
}

/// Whether a model of hidden layers `hidden` wide can take the lined passes.
pub fn fits(hidden: usize) -> bool {
    hidden.is_multiple_of(LINE)
}

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
    let items = comptime!(pcs * out_w.div_ceil(SIDE_LANES * LINE) * PLANE);
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
                #[unroll]
                for c in 0..LINE {
                    let wl = pv[w0 + c * comptime!(in_w / LINE) + q];
                    #[unroll]
                    for j in 0..LINE {
                        w[c * LINE + j] = wl[j];
                    }
                }
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
    let items = comptime!(kcs * out_w.div_ceil(SIDE_LANES * gu) * PLANE);
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
    // Bias gradients: Σ over the tile of δ.
    let mut u = unit;
    while u < out_w {
        let mut g = F::new(0.0);
        for t in 0..tile {
            g += buf[at.dst + t * so + u];
        }
        let i = row + off + comptime!(out_w * in_w) + u;
        if first {
            partials[i] = g;
        } else {
            partials[i] += g;
        }
        u += units;
    }
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
    let items = comptime!(pcs * in_w.div_ceil(SIDE_LANES * LINE) * PLANE);
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
                #[unroll]
                for i in 0..LINE {
                    let wl = pv[(at.off + (q * LINE + i) * in_w + kc) / LINE];
                    #[unroll]
                    for e in 0..LINE {
                        w[i * LINE + e] = wl[e];
                    }
                }
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
