//! The layer passes of the tiled kernel ([`crate::engine::fused::gpu::kernels::tiled`]) over a tile of
//! points in shared memory (rows of [`stride`] values a point): a hidden
//! layer forward, and a layer backward (its weight and bias gradients, and
//! the δ of the layer below). Each is a small matrix product that the cube's
//! units share out in register blocks — a unit computes several points ×
//! several units (or a block of weight-gradient entries) at a time, so every
//! value it loads serves several multiply-adds: the pass is bound by loads,
//! not arithmetic (docs/PERFORMANCE.md, "Deep models"). In f16/bf16 without
//! tensor cores (`Layer::half`), the activations and δs that are
//! hidden-to-hidden operands are rounded as they are stored (the weights
//! come rounded: `round::round_params`), and the gradient rows are scaled at
//! the end instead of the δs
//! ([`crate::engine::fused::half`]).

use crate::config::Activation;
use crate::engine::fused::gpu::kernels::math::{act_bwd_at, act_fwd};
use crate::engine::fused::gpu::kernels::round::{add_to_row, operand, put_row, row_before};
use crate::engine::fused::gpu::shape::{keeps_z, Blocks};
use crate::engine::fused::half::Half;
use cubecl::prelude::*;

/// Row stride in the tile buffer of a layer `width` wide: odd, against bank conflicts.
pub fn stride(width: usize) -> usize {
    width | 1
}

/// Rows each hidden layer keeps per point: `a`, or `z` and `a` for `act`s
/// whose derivative needs z ([`keeps_z`]).
pub fn hidden_rows(act: Activation) -> usize {
    if keeps_z(act) {
        2
    } else {
        1
    }
}

/// One layer of the tiled pass, as a layer function is compiled for it:
/// points a tile, widths in and out, the activation, and (backward) whether
/// the δ of a hidden layer below is wanted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Layer {
    /// Points a tile.
    pub tile: usize,
    /// Width of the layer's input.
    pub in_w: usize,
    /// Width of its output.
    pub out_w: usize,
    /// Hidden-layer activation.
    pub act: Activation,
    /// Backward: whether the δ of a hidden layer below is wanted.
    pub below: bool,
    /// The register blocks its products are shared out in.
    pub blocks: Blocks,
    /// Row stride of its input rows in the tile buffer.
    pub si: usize,
    /// Row stride of its output rows.
    pub so: usize,
    /// Half-precision operands emulated: the type the outputs a caller asks
    /// for are rounded to (None in f32).
    pub half: Option<Half>,
}

impl Layer {
    /// A layer with the default blocks and odd row strides ([`stride`]).
    pub fn new(tile: usize, in_w: usize, out_w: usize, act: Activation, below: bool) -> Layer {
        Layer {
            tile,
            in_w,
            out_w,
            act,
            below,
            blocks: Blocks::default(),
            si: stride(in_w),
            so: stride(out_w),
            half: None,
        }
    }
}

/// Where one layer's values are at run time: its weights from `off` in the
/// flat parameters; its input rows (a) from `src` and its output rows (z and
/// a forward, δ backward) from `dst` in the tile buffer.
#[derive(CubeType, Clone, Copy)]
pub struct At {
    /// Offset of the layer's weights in the flat parameters.
    pub off: usize,
    /// Offset of its input rows in the tile buffer.
    pub src: usize,
    /// Offset of its output rows (z and a forward, δ backward).
    pub dst: usize,
}

/// b_u + Σ_k w[u, k]·a[t, k] for point `t` and unit `u` of the layer `at`.
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
    let off = at.off;
    let src = at.src + t * comptime!(layer.si);
    let mut z = params[off + comptime!(layer.out_w * in_w) + u];
    for k in 0..in_w {
        z += params[off + u * in_w + k] * buf[src + k];
    }
    z
}

/// `i` if below `len`, else `len - 1`: loads of a block's padding stay in bounds.
#[cube]
pub fn clamp_to(i: usize, #[comptime] len: usize) -> usize {
    clamp_max(i, comptime!(len - 1))
}

/// A hidden layer over the tile: its rows at `at.dst` (act(z), after z where
/// kept). Each unit takes a block of `blocks.points` points (a block count
/// apart) × `blocks.units` output units at a time; neighbouring units take
/// neighbouring points of the same output units. `round`: its a is an
/// operand of the next product (with `layer.half`).
#[cube]
pub fn hidden_forward<F: Float>(
    params: &Array<F>,
    buf: &mut SharedMemory<F>,
    at: &At,
    round: bool,
    #[comptime] layer: Layer,
) {
    let (tile, in_w, hidden, act) = comptime!((layer.tile, layer.in_w, layer.out_w, layer.act));
    let (bt, bu) = comptime!((layer.blocks.points, layer.blocks.units));
    let (si, sh) = comptime!((layer.si, layer.so));
    let off = at.off;
    let src = at.src;
    let dst = at.dst;
    let rows = comptime!(tile.div_ceil(bt));
    let blocks = comptime!(tile.div_ceil(bt) * hidden.div_ceil(bu));
    let mut m = UNIT_POS as usize;
    while m < blocks {
        let t0 = m % rows;
        let u0 = (m / rows) * bu;
        let mut at = Array::<usize>::new(bt);
        let mut wu = Array::<usize>::new(bu);
        let mut acc = Array::<F>::new(comptime!(bt * bu));
        #[unroll]
        for r in 0..bt {
            at[r] = src + clamp_to(t0 + r * rows, tile) * si;
        }
        #[unroll]
        for c in 0..bu {
            let u = clamp_to(u0 + c, hidden);
            wu[c] = off + u * in_w;
            let bias = params[off + comptime!(hidden * in_w) + u];
            #[unroll]
            for r in 0..bt {
                acc[r * bu + c] = bias;
            }
        }
        for k in 0..in_w {
            let mut av = Array::<F>::new(bt);
            #[unroll]
            for r in 0..bt {
                av[r] = buf[at[r] + k];
            }
            #[unroll]
            for c in 0..bu {
                let w = params[wu[c] + k];
                #[unroll]
                for r in 0..bt {
                    acc[r * bu + c] += av[r] * w;
                }
            }
        }
        #[unroll]
        for r in 0..bt {
            let t = t0 + r * rows;
            #[unroll]
            for c in 0..bu {
                if t < tile && u0 + c < hidden {
                    let z = acc[r * bu + c];
                    let i = dst + t * sh + u0 + c;
                    let a = operand::<F>(act_fwd::<F>(z, act), round, layer.half);
                    if comptime!(keeps_z(act)) {
                        buf[i] = z;
                        buf[i + comptime!(tile * sh)] = a;
                    } else {
                        buf[i] = a;
                    }
                }
            }
        }
        m += CUBE_DIM as usize;
    }
}

/// The bias gradients of the layer `at` (its δ rows at `at.dst`), Σ over the
/// tile of δ, into the cube's partial row from `row` ([`add_to_row`]); a
/// unit a bias.
#[cube]
pub fn bias_gradients<F: Float>(
    buf: &SharedMemory<F>,
    partials: &mut Array<F>,
    row: usize,
    first: bool,
    end: F,
    at: &At,
    #[comptime] layer: Layer,
) {
    let (tile, in_w, out_w, so) = comptime!((layer.tile, layer.in_w, layer.out_w, layer.so));
    let mut u = UNIT_POS as usize;
    while u < out_w {
        let mut g = F::new(0.0);
        for t in 0..tile {
            g += buf[at.dst + t * so + u];
        }
        let i = row + at.off + comptime!(out_w * in_w) + u;
        add_to_row::<F>(partials, i, g, first, end, layer.half);
        u += CUBE_DIM as usize;
    }
}

/// Backward through the layer `at` (its a at `at.src`, its δ at `at.dst`):
/// its weight and bias gradients into the cube's partial row from `row`
/// ([`add_to_row`]: each unit always owns the same entries, so no other unit
/// touches them), and, with `layer.below`, the hidden layer below's δ written
/// over its first row (z, or a) — an operand when `round`.
#[cube]
#[allow(clippy::too_many_arguments)]
pub fn backward<F: Float>(
    params: &Array<F>,
    buf: &mut SharedMemory<F>,
    partials: &mut Array<F>,
    row: usize,
    first: bool,
    end: F,
    round: bool,
    at: &At,
    #[comptime] layer: Layer,
) {
    let (tile, in_w, out_w, act) = comptime!((layer.tile, layer.in_w, layer.out_w, layer.act));
    let (gu, gk) = comptime!((layer.blocks.grad_u, layer.blocks.grad_k));
    let ahead = comptime!(layer.blocks.rows_ahead);
    let off = at.off;
    let src = at.src;
    let delta = at.dst;
    let (si, so) = comptime!((layer.si, layer.so));
    let unit = UNIT_POS as usize;
    let units = CUBE_DIM as usize;
    // Weight gradients: gu units × gk inputs (a block count apart) a block,
    // Σ over the tile of δ·a.
    let kb = comptime!(in_w.div_ceil(gk));
    let blocks = comptime!(out_w.div_ceil(gu) * in_w.div_ceil(gk));
    let mut m = unit;
    while m < blocks {
        let k0 = m % kb;
        let u0 = (m / kb) * gu;
        let mut du = Array::<usize>::new(gu);
        let mut ak = Array::<usize>::new(gk);
        let mut g = Array::<F>::new(comptime!(gu * gk));
        #[unroll]
        for c in 0..gu {
            du[c] = delta + clamp_to(u0 + c, out_w);
        }
        #[unroll]
        for j in 0..gk {
            ak[j] = src + clamp_to(k0 + j * kb, in_w);
        }
        #[unroll]
        for i in 0..comptime!(gu * gk) {
            g[i] = F::new(0.0);
        }
        // With `rows_ahead`, the block's entries of the partial row, read
        // now: their loads (global memory) complete during the Σ.
        let mut before = Array::<F>::new(comptime!(gu * gk));
        if comptime!(ahead) {
            #[unroll]
            for c in 0..gu {
                #[unroll]
                for j in 0..gk {
                    let k = k0 + j * kb;
                    let i = row + off + (u0 + c) * in_w + k;
                    before[c * gk + j] = F::new(0.0);
                    if u0 + c < out_w && k < in_w {
                        before[c * gk + j] = row_before::<F>(partials, i, first);
                    }
                }
            }
        }
        for t in 0..tile {
            let mut av = Array::<F>::new(gk);
            #[unroll]
            for j in 0..gk {
                av[j] = buf[ak[j] + t * si];
            }
            #[unroll]
            for c in 0..gu {
                let d = buf[du[c] + t * so];
                #[unroll]
                for j in 0..gk {
                    g[c * gk + j] += d * av[j];
                }
            }
        }
        #[unroll]
        for c in 0..gu {
            #[unroll]
            for j in 0..gk {
                let k = k0 + j * kb;
                if u0 + c < out_w && k < in_w {
                    let i = row + off + (u0 + c) * in_w + k;
                    let v = g[c * gk + j];
                    if comptime!(ahead) {
                        let b = before[c * gk + j];
                        put_row::<F>(partials, i, v, b, first, end, layer.half);
                    } else {
                        add_to_row::<F>(partials, i, v, first, end, layer.half);
                    }
                }
            }
        }
        m += units;
    }
    bias_gradients::<F>(buf, partials, row, first, end, at, layer);
    if comptime!(layer.below) {
        // The layer below's first row: its z, or its a (which `src` is).
        let zb = src - comptime!((hidden_rows(act) - 1) * tile * si);
        // δ_below[t, k] = act'(z[t, k]) Σ_u w[u, k] δ[t, u], in blocks of
        // points × inputs as forward, over the layer below's first row: its
        // z, or its a (read above) once every unit is past the gradients.
        if comptime!(!keeps_z(act)) {
            sync_cube();
        }
        let (bt, bk) = comptime!((layer.blocks.points, layer.blocks.units));
        let rows = comptime!(tile.div_ceil(bt));
        let blocks = comptime!(tile.div_ceil(bt) * in_w.div_ceil(bk));
        let mut m = unit;
        while m < blocks {
            let t0 = m % rows;
            let k0 = (m / rows) * bk;
            let mut dt = Array::<usize>::new(bt);
            let mut wk = Array::<usize>::new(bk);
            let mut s = Array::<F>::new(comptime!(bt * bk));
            #[unroll]
            for r in 0..bt {
                dt[r] = delta + clamp_to(t0 + r * rows, tile) * so;
            }
            #[unroll]
            for c in 0..bk {
                wk[c] = off + clamp_to(k0 + c, in_w);
            }
            #[unroll]
            for i in 0..comptime!(bt * bk) {
                s[i] = F::new(0.0);
            }
            for u in 0..out_w {
                let mut dv = Array::<F>::new(bt);
                #[unroll]
                for r in 0..bt {
                    dv[r] = buf[dt[r] + u];
                }
                #[unroll]
                for c in 0..bk {
                    let w = params[wk[c] + u * in_w];
                    #[unroll]
                    for r in 0..bt {
                        s[r * bk + c] += dv[r] * w;
                    }
                }
            }
            #[unroll]
            for r in 0..bt {
                let t = t0 + r * rows;
                #[unroll]
                for c in 0..bk {
                    if t < tile && k0 + c < in_w {
                        let i = zb + t * si + k0 + c;
                        let z = buf[i];
                        let d = s[r * bk + c] * act_bwd_at::<F>(z, act);
                        buf[i] = operand::<F>(d, round, layer.half);
                    }
                }
            }
            m += units;
        }
    }
}
