//! The fused GPU pass for models the per-point kernels cannot hold: several
//! hidden layers, or one layer with more than [`MAX_GPU_PARAMS`] parameters.
//!
//! A cube takes a tile of `tile` points at a time (grid-stride over tiles).
//! The tile's inputs, every hidden layer's activations `a` (and
//! pre-activations `z` where the activation's derivative needs them: silu,
//! gelu), and the output deltas live in shared memory, one row per point with an
//! odd stride (so units reading the same column of different points hit
//! different banks); the weights are read from the device buffer (the same for
//! every cube, so they stay cached). Forward, layer by layer: the cube's units
//! split the tile × width outputs of a layer between them, neighbouring units
//! taking neighbouring points of one output unit (they read one weight
//! together). Backward, from the output down: each unit owns the
//! weight-gradient entries `p ≡ unit (mod cube size)` of the layer and adds
//! Σ over the tile of δ·a into its cube's partial row in device memory (no
//! other unit touches those entries, so no barrier or atomic is needed), while
//! the units also turn the layer below's `z` into its δ in place. One barrier
//! per layer and direction.
//!
//! The partial rows have the layout of [`super::gpu_kernel::fused_grad`]'s
//! (`partials[cube][p]`, the loss last), so the same `reduce_update` sums them
//! and steps the optimizer: two launches per optimizer step. Points past the
//! end of the micro-batch enter with zero inputs and leave a zero δ, so they
//! add nothing. The order of every sum is fixed: deterministic.
//!
//! [`MAX_GPU_PARAMS`]: super::gpu_kernel_limits::MAX_GPU_PARAMS

use super::gpu_math::{act_bwd_at, act_fwd, keeps_z, loss_grad, loss_value};
use super::gpu_ops::cube_sum;
use cubecl::prelude::*;

/// Largest tile: past it, bigger tiles only add idle tail work.
pub const MAX_TILE: usize = 128;

/// Shared memory the tiled kernel uses at most, in bytes (more where the device has it,
/// up to this; the WebGPU floor of 16 KiB at least).
pub const TILE_SHARED_BYTES: usize = 48 * 1024;

/// Shared memory every WebGPU device has per workgroup, in bytes.
const WEBGPU_SHARED_BYTES: usize = 16 * 1024;

/// Values the cube sum of the loss needs in shared memory.
const LOSS_SCRATCH: usize = 256;

/// Row stride in the tile buffer of a layer `width` wide: odd, against bank conflicts.
fn stride(width: usize) -> usize {
    width | 1
}

/// Rows each hidden layer keeps per point: `a`, or `z` and `a` for `act`s
/// whose derivative needs z ([`keeps_z`]).
fn hidden_rows(act: u32) -> usize {
    if keeps_z(act) {
        2
    } else {
        1
    }
}

/// Shared-memory values one point of a tile needs: inputs, every hidden
/// layer's rows, output deltas (each row padded to an odd stride).
pub fn tile_values(inputs: usize, hidden: usize, layers: usize, outputs: usize, act: u32) -> usize {
    stride(inputs) + hidden_rows(act) * layers * stride(hidden) + stride(outputs)
}

/// Points a tile holds on a device with `max_shared` bytes of shared memory
/// per cube (at least 1: the widest model of the envelope needs 9.4 KiB for one point).
pub fn tile_points(
    inputs: usize,
    hidden: usize,
    layers: usize,
    outputs: usize,
    act: u32,
    max_shared: usize,
) -> usize {
    let values = max_shared.clamp(WEBGPU_SHARED_BYTES, TILE_SHARED_BYTES) / 4;
    let t = (values - LOSS_SCRATCH) / tile_values(inputs, hidden, layers, outputs, act);
    t.clamp(1, MAX_TILE)
}

/// Forward, loss and backward over `count` points from `start` (or listed in
/// `idx`) for an MLP of `layers` hidden layers of `hidden` units, times
/// `scale`; one partial row per cube into `partials` (`np + 1` values each).
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub fn tiled_grad<F: Float + CubeElement>(
    x: &Array<F>,
    y: &Array<F>,
    idx: &Array<u32>,
    params: &Array<F>,
    partials: &mut Array<F>,
    start: u32,
    count: u32,
    scale: F,
    #[comptime] inputs: usize,
    #[comptime] hidden: usize,
    #[comptime] layers: usize,
    #[comptime] outputs: usize,
    #[comptime] act: u32,
    #[comptime] loss: u32,
    #[comptime] use_idx: bool,
    #[comptime] plane: bool,
    #[comptime] tile: usize,
) {
    let np = comptime!(layer_offset(inputs, hidden, layers) + outputs * hidden + outputs);
    let units = CUBE_DIM as usize;
    let unit = UNIT_POS as usize;
    let row = CUBE_POS * (np + 1);
    let per = comptime!(tile_values(inputs, hidden, layers, outputs, act));
    let mut buf = SharedMemory::<F>::new(comptime!(tile * per));
    let mut red = SharedMemory::<F>::new(LOSS_SCRATCH);
    let si = comptime!(stride(inputs));
    // Offsets in `buf`: hidden layer 1's rows, one hidden layer's rows, its a
    // within them, the output deltas. A layer's δ goes over its first row.
    let z1 = comptime!(tile * stride(inputs));
    let pair = comptime!(hidden_rows(act) * tile * stride(hidden));
    let a_at = comptime!((hidden_rows(act) - 1) * tile * stride(hidden));
    let dout = comptime!(tile * stride(inputs) + layers * hidden_rows(act) * tile * stride(hidden));
    let hh = comptime!(hidden * hidden + hidden);
    let off1 = comptime!(layer_offset(inputs, hidden, 1));
    let off_out = comptime!(layer_offset(inputs, hidden, layers));

    // A cube with no tile still leaves a row (of zeros); the others write
    // theirs on their first tile.
    if CUBE_POS * tile >= count as usize {
        let mut p = unit;
        while p < np {
            partials[row + p] = F::new(0.0);
            p += units;
        }
    }

    let mut lsum = F::new(0.0);
    let n = count as usize;
    let mut base = CUBE_POS * tile;
    while base < n {
        let first = base == CUBE_POS * tile;
        // Inputs of the tile; points past the end read zeros.
        let mut e = unit;
        while e < comptime!(tile * inputs) {
            let t = e / inputs;
            let a = e % inputs;
            let mut v = F::new(0.0);
            if base + t < n {
                let pt = point(idx, start, base + t, use_idx);
                v = x[pt * inputs + a];
            }
            buf[t * si + a] = v;
            e += units;
        }
        sync_cube();

        // Forward. Hidden layers past the first share one loop body (runtime
        // offsets): unrolling every layer made lavapipe's compiler take minutes.
        hidden_forward::<F>(params, &mut buf, 0, 0, z1, tile, inputs, hidden, act);
        sync_cube();
        for l in 1..layers {
            let dst = z1 + l * pair;
            let off = off1 + (l - 1) * hh;
            hidden_forward::<F>(
                params,
                &mut buf,
                off,
                dst - pair + a_at,
                dst,
                tile,
                hidden,
                hidden,
                act,
            );
            sync_cube();
        }
        let mut e = unit;
        while e < comptime!(tile * outputs) {
            let t = e % tile;
            let u = e / tile;
            let z = dense::<F>(
                params,
                &buf,
                off_out,
                dout - pair + a_at,
                t,
                u,
                hidden,
                outputs,
            );
            let mut d = F::new(0.0);
            if base + t < n {
                let pt = point(idx, start, base + t, use_idx);
                let r = z - y[pt * outputs + u];
                lsum += loss_value::<F>(r, loss);
                d = loss_grad::<F>(r, loss) * scale;
            }
            buf[dout + t * comptime!(stride(outputs)) + u] = d;
            e += units;
        }
        sync_cube();

        // Backward, from the output layer down.
        let zl = dout - pair;
        backward::<F>(
            params,
            &mut buf,
            partials,
            row,
            off_out,
            zl + a_at,
            dout,
            zl,
            first,
            tile,
            hidden,
            outputs,
            act,
            true,
        );
        sync_cube();
        for r in 1..layers {
            let l = layers - r;
            let delta = z1 + l * pair;
            let off = off1 + (l - 1) * hh;
            backward::<F>(
                params,
                &mut buf,
                partials,
                row,
                off,
                delta - pair + a_at,
                delta,
                delta - pair,
                first,
                tile,
                hidden,
                hidden,
                act,
                true,
            );
            sync_cube();
        }
        backward::<F>(
            params, &mut buf, partials, row, 0, 0, z1, 0, first, tile, inputs, hidden, act, false,
        );
        sync_cube();
        base += CUBE_COUNT * tile;
    }

    let total = cube_sum::<F>(lsum * scale, &mut red, plane);
    if unit == 0usize {
        partials[row + np] = total;
    }
}

/// b_u + Σ_k w[u, k]·a[t, k] for the layer whose weights start at `off` and
/// whose inputs (rows of stride `stride(in_w)`) start at `src` in the tile buffer.
#[cube]
#[allow(clippy::too_many_arguments)]
fn dense<F: Float>(
    params: &Array<F>,
    buf: &SharedMemory<F>,
    off: usize,
    src: usize,
    t: usize,
    u: usize,
    #[comptime] in_w: usize,
    #[comptime] out_w: usize,
) -> F {
    let at = src + t * comptime!(stride(in_w));
    let mut z = params[off + comptime!(out_w * in_w) + u];
    for k in 0..in_w {
        z += params[off + u * in_w + k] * buf[at + k];
    }
    z
}

/// Points of a forward or δ block (each unit computes points × [`BLOCK_U`]
/// units at a time, so every value it loads serves several multiply-adds:
/// the pass is bound by loads): 4 once a tile has 32 points (enough blocks
/// for the cube's units), else 2.
fn block_t(tile: usize) -> usize {
    if tile >= 32 {
        4
    } else {
        2
    }
}

/// Units (or inputs, for δ) of a forward or δ block.
const BLOCK_U: usize = 4;
/// Units × inputs of the weight-gradient block each unit owns.
const GRAD_U: usize = 4;
const GRAD_K: usize = 4;

/// `i` if below `len`, else `len - 1`: loads of a block's padding stay in bounds.
#[cube]
fn clamp_to(i: usize, #[comptime] len: usize) -> usize {
    clamp_max(i, comptime!(len - 1))
}

/// A hidden layer over the tile: its rows at `dst` (act(z), after z where kept).
/// Each unit takes [`block_t`] points × [`BLOCK_U`] output units at a time;
/// neighbouring units take neighbouring points of the same output units.
#[cube]
#[allow(clippy::too_many_arguments)]
fn hidden_forward<F: Float>(
    params: &Array<F>,
    buf: &mut SharedMemory<F>,
    off: usize,
    src: usize,
    dst: usize,
    #[comptime] tile: usize,
    #[comptime] in_w: usize,
    #[comptime] hidden: usize,
    #[comptime] act: u32,
) {
    let (si, sh) = comptime!((stride(in_w), stride(hidden)));
    let bt = comptime!(block_t(tile));
    let rows = comptime!(tile.div_ceil(bt));
    let blocks = comptime!(tile.div_ceil(bt) * hidden.div_ceil(BLOCK_U));
    let mut m = UNIT_POS as usize;
    while m < blocks {
        let t0 = (m % rows) * bt;
        let u0 = (m / rows) * BLOCK_U;
        let mut at = Array::<usize>::new(bt);
        let mut wu = Array::<usize>::new(BLOCK_U);
        let mut acc = Array::<F>::new(comptime!(bt * BLOCK_U));
        #[unroll]
        for r in 0..bt {
            at[r] = src + clamp_to(t0 + r, tile) * si;
        }
        #[unroll]
        for c in 0..BLOCK_U {
            let u = clamp_to(u0 + c, hidden);
            wu[c] = off + u * in_w;
            let bias = params[off + comptime!(hidden * in_w) + u];
            #[unroll]
            for r in 0..bt {
                acc[r * BLOCK_U + c] = bias;
            }
        }
        for k in 0..in_w {
            let mut av = Array::<F>::new(bt);
            #[unroll]
            for r in 0..bt {
                av[r] = buf[at[r] + k];
            }
            #[unroll]
            for c in 0..BLOCK_U {
                let w = params[wu[c] + k];
                #[unroll]
                for r in 0..bt {
                    acc[r * BLOCK_U + c] += av[r] * w;
                }
            }
        }
        #[unroll]
        for r in 0..bt {
            #[unroll]
            for c in 0..BLOCK_U {
                if t0 + r < tile && u0 + c < hidden {
                    let z = acc[r * BLOCK_U + c];
                    let i = dst + (t0 + r) * sh + u0 + c;
                    if comptime!(keeps_z(act)) {
                        buf[i] = z;
                        buf[i + comptime!(tile * stride(hidden))] = act_fwd::<F>(z, act);
                    } else {
                        buf[i] = act_fwd::<F>(z, act);
                    }
                }
            }
        }
        m += CUBE_DIM as usize;
    }
}

/// Backward through the layer with weights at `off`, inputs (its a) at `src`
/// and deltas at `delta`: its weight and bias gradients into the cube's
/// partial row (written on the cube's `first` tile, added after; each unit
/// always owns the same entries, so no other unit touches them), and, with
/// `below`, the hidden layer below's δ written over its first row at `zb`.
#[cube]
#[allow(clippy::too_many_arguments)]
fn backward<F: Float>(
    params: &Array<F>,
    buf: &mut SharedMemory<F>,
    partials: &mut Array<F>,
    row: usize,
    off: usize,
    src: usize,
    delta: usize,
    zb: usize,
    first: bool,
    #[comptime] tile: usize,
    #[comptime] in_w: usize,
    #[comptime] out_w: usize,
    #[comptime] act: u32,
    #[comptime] below: bool,
) {
    let (si, so) = comptime!((stride(in_w), stride(out_w)));
    let unit = UNIT_POS as usize;
    let units = CUBE_DIM as usize;
    // Weight gradients: GRAD_U × GRAD_K blocks, Σ over the tile of δ·a.
    let kb = comptime!(in_w.div_ceil(GRAD_K));
    let blocks = comptime!(out_w.div_ceil(GRAD_U) * in_w.div_ceil(GRAD_K));
    let mut m = unit;
    while m < blocks {
        let k0 = (m % kb) * GRAD_K;
        let u0 = (m / kb) * GRAD_U;
        let mut du = Array::<usize>::new(GRAD_U);
        let mut ak = Array::<usize>::new(GRAD_K);
        let mut g = Array::<F>::new(comptime!(GRAD_U * GRAD_K));
        #[unroll]
        for c in 0..GRAD_U {
            du[c] = delta + clamp_to(u0 + c, out_w);
        }
        #[unroll]
        for j in 0..GRAD_K {
            ak[j] = src + clamp_to(k0 + j, in_w);
        }
        #[unroll]
        for i in 0..comptime!(GRAD_U * GRAD_K) {
            g[i] = F::new(0.0);
        }
        for t in 0..tile {
            let mut av = Array::<F>::new(GRAD_K);
            #[unroll]
            for j in 0..GRAD_K {
                av[j] = buf[ak[j] + t * si];
            }
            #[unroll]
            for c in 0..GRAD_U {
                let d = buf[du[c] + t * so];
                #[unroll]
                for j in 0..GRAD_K {
                    g[c * GRAD_K + j] += d * av[j];
                }
            }
        }
        #[unroll]
        for c in 0..GRAD_U {
            #[unroll]
            for j in 0..GRAD_K {
                if u0 + c < out_w && k0 + j < in_w {
                    let i = row + off + (u0 + c) * in_w + k0 + j;
                    if first {
                        partials[i] = g[c * GRAD_K + j];
                    } else {
                        partials[i] += g[c * GRAD_K + j];
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
            g += buf[delta + t * so + u];
        }
        let i = row + off + comptime!(out_w * in_w) + u;
        if first {
            partials[i] = g;
        } else {
            partials[i] += g;
        }
        u += units;
    }
    if below {
        // δ_below[t, k] = act'(z[t, k]) Σ_u w[u, k] δ[t, u], in block_t points ×
        // BLOCK_U inputs blocks, over the layer below's first row: its z, or
        // its a (read above) once every unit is past the gradients.
        if comptime!(!keeps_z(act)) {
            sync_cube();
        }
        let bt = comptime!(block_t(tile));
        let rows = comptime!(tile.div_ceil(bt));
        let blocks = comptime!(tile.div_ceil(bt) * in_w.div_ceil(BLOCK_U));
        let mut m = unit;
        while m < blocks {
            let t0 = (m % rows) * bt;
            let k0 = (m / rows) * BLOCK_U;
            let mut dt = Array::<usize>::new(bt);
            let mut wk = Array::<usize>::new(BLOCK_U);
            let mut s = Array::<F>::new(comptime!(bt * BLOCK_U));
            #[unroll]
            for r in 0..bt {
                dt[r] = delta + clamp_to(t0 + r, tile) * so;
            }
            #[unroll]
            for c in 0..BLOCK_U {
                wk[c] = off + clamp_to(k0 + c, in_w);
            }
            #[unroll]
            for i in 0..comptime!(bt * BLOCK_U) {
                s[i] = F::new(0.0);
            }
            for u in 0..out_w {
                let mut dv = Array::<F>::new(bt);
                #[unroll]
                for r in 0..bt {
                    dv[r] = buf[dt[r] + u];
                }
                #[unroll]
                for c in 0..BLOCK_U {
                    let w = params[wk[c] + u * in_w];
                    #[unroll]
                    for r in 0..bt {
                        s[r * BLOCK_U + c] += dv[r] * w;
                    }
                }
            }
            #[unroll]
            for r in 0..bt {
                #[unroll]
                for c in 0..BLOCK_U {
                    if t0 + r < tile && k0 + c < in_w {
                        let i = zb + (t0 + r) * si + k0 + c;
                        let z = buf[i];
                        buf[i] = s[r * BLOCK_U + c] * act_bwd_at::<F>(z, act);
                    }
                }
            }
            m += units;
        }
    }
}

/// Index in the dataset of point `i` of the micro-batch.
#[cube]
fn point(idx: &Array<u32>, start: u32, i: usize, #[comptime] use_idx: bool) -> usize {
    if use_idx {
        idx[i] as usize
    } else {
        start as usize + i
    }
}

/// Offset in the flat parameters of layer `l`'s weights (`Params::flatten`:
/// each layer's weights, out × in, then its biases).
fn layer_offset(inputs: usize, hidden: usize, l: usize) -> usize {
    if l == 0 {
        0
    } else {
        hidden * inputs + hidden + (l - 1) * (hidden * hidden + hidden)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fused::envelope::{MAX_HIDDEN, MAX_IO, MAX_LAYERS};

    /// gelu keeps z and a: the widest rows.
    const GELU: u32 = 4;

    #[test]
    fn the_widest_model_fits_a_point_in_the_smallest_shared_memory() {
        let per = tile_values(MAX_IO, MAX_HIDDEN, MAX_LAYERS, MAX_IO, GELU);
        assert!(LOSS_SCRATCH + per <= WEBGPU_SHARED_BYTES / 4);
        let relu = tile_values(MAX_IO, MAX_HIDDEN, MAX_LAYERS, MAX_IO, 0);
        assert!(relu < per, "relu keeps one row a hidden layer");
        assert_eq!(
            tile_points(MAX_IO, MAX_HIDDEN, MAX_LAYERS, MAX_IO, GELU, 0),
            (WEBGPU_SHARED_BYTES / 4 - LOSS_SCRATCH) / per
        );
    }

    #[test]
    fn small_models_take_the_largest_tile() {
        assert_eq!(tile_points(1, 10, 2, 1, 0, 1 << 20), MAX_TILE);
        assert!(tile_points(1, 64, 3, 1, GELU, 1 << 20) < MAX_TILE);
    }
}
