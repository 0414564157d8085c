//! What the two tensor-core passes (`tensor`, `strips`) do alike around their
//! tiles: their shared arrays placed in a fixed order ([`claim`]), their
//! zeroed register sums, the hidden weights into shared memory
//! at the start of a launch, a row of zeros from a cube with no tile, and at
//! the end the cube's partial
//! row finished — the bias and first-layer sums flushed ([`sums::flush`]),
//! the row scaled by the batch's scale (the δs were unscaled).

use crate::engine::fused::gpu::kernels::colsums::Cols;
use crate::engine::fused::gpu::kernels::round::to_operand;
use crate::engine::fused::gpu::kernels::sums::{self, Sum};
use crate::engine::fused::gpu::shape::Shape;
use cubecl::prelude::*;

/// Makes `smem` live in a block of its own (a store that never runs: no
/// cube's position reaches the cube count). CubeCL places a kernel's shared
/// arrays in the order they become live, and those that become live in the
/// same block in a hash set's order, new in every process (`cubecl-opt`'s
/// `SharedLiveness`); claimed one by one at the top of a kernel, they take
/// the claims' order at every compile. NVRTC's program of one source can
/// differ by 40 registers a unit between layouts (docs/PERFORMANCE.md, "One
/// source, two programs").
#[cube]
pub fn claim<T: Numeric>(smem: &mut SharedMemory<T>) {
    if CUBE_POS >= CUBE_COUNT {
        smem[0] = T::from_int(0);
    }
}

/// Ends `smem`'s life at the end of a kernel (uniform control flow, no use
/// after it): without it every array is live at the kernel's exit together,
/// and CubeCL places them there in a hash set's order ([`claim`]).
#[cube]
pub fn release<T: CubePrimitive>(smem: SharedMemory<T>) {
    // SAFETY: called last, in uniform control flow, with no view of `smem` left.
    unsafe { smem.free() }
}

/// `len` zeros in registers: a sum kept over the tiles.
#[cube]
pub fn zeroed<F: Float>(#[comptime] len: usize) -> Array<F> {
    let mut a = Array::<F>::new(len);
    #[unroll]
    for k in 0..len {
        a[k] = F::new(0.0);
    }
    a
}

/// Copies the `layers − 1` hidden-to-hidden weight matrices of the master
/// weights `params` (from `off1`, `hh` values a layer) into `wsm` in the
/// operand type, each row padded to `sh` values; the cube's `units`
/// together (a cube barrier must follow). Cast here, a launch a step fewer
/// than casting them all first.
#[cube]
pub fn hidden_weights_to_shared<F: Float, E: Float>(
    params: &Array<F>,
    wsm: &mut SharedMemory<E>,
    #[comptime] shape: Shape,
    #[comptime] sh: usize,
    #[comptime] units: usize,
    #[comptime] spirv: bool,
) {
    let (hidden, layers) = comptime!((shape.hidden, shape.layers));
    let hh = comptime!(hidden * hidden + hidden);
    let off1 = comptime!(hidden * shape.inputs + hidden);
    let w_rows = comptime!(hidden * sh);
    let mut k = UNIT_POS as usize;
    while k < comptime!((layers - 1) * hidden * hidden) {
        let l = k / comptime!(hidden * hidden);
        let r = k % comptime!(hidden * hidden);
        wsm[l * w_rows + (r / hidden) * sh + r % hidden] =
            to_operand::<F, E>(params[off1 + l * hh + r], spirv);
        k += units;
    }
}

/// Zeros for the `np` values of `row` of `partials` where the cube takes no
/// tile of the batch's `n` points (its row is summed like every other).
#[cube]
pub fn zero_if_idle<F: Float>(
    partials: &mut Array<F>,
    row: usize,
    n: usize,
    #[comptime] np: usize,
    #[comptime] tile: usize,
    #[comptime] units: usize,
) {
    if CUBE_POS * tile >= n {
        let mut p = UNIT_POS as usize;
        while p < np {
            partials[row + p] = F::new(0.0);
            p += units;
        }
    }
}

/// The end of the launch: the first layer's weight sums (`acc_first`) and
/// every layer's bias sums (`acc_bias`, a sum a layer) into `row` — those
/// the down products kept (`cols`) written already —, then the row's `np`
/// gradient values times `scale`. Every unit calls it.
#[cube]
#[allow(clippy::too_many_arguments)]
pub fn finish<F: Float>(
    acc_first: &Array<F>,
    acc_bias: &Array<F>,
    red: &mut SharedMemory<F>,
    partials: &mut Array<F>,
    row: usize,
    scale: F,
    #[comptime] shape: Shape,
    #[comptime] s_first: Sum,
    #[comptime] s_bias: Sum,
    #[comptime] cols: Option<Cols>,
) {
    let (inputs, hidden, layers) = comptime!((shape.inputs, shape.hidden, shape.layers));
    let hh = comptime!(hidden * hidden + hidden);
    let off1 = comptime!(hidden * inputs + hidden);
    let np = comptime!(shape.params());
    // Sums the down products made are written already (`colsums::flush`).
    let (from, first_done) = comptime!(cols.map_or((0, false), |c| (c.layers - 1, c.first)));
    if comptime!(!first_done) {
        sums::flush::<F>(acc_first, 0, red, partials, row, s_first);
    }
    if comptime!(from == 0) {
        let at_first_bias = row + comptime!(hidden * inputs);
        sums::flush::<F>(acc_bias, 0, red, partials, at_first_bias, s_bias);
    }
    for l in comptime!(from.max(1))..layers {
        let at = row + off1 + (l - 1) * hh + comptime!(hidden * hidden);
        sums::flush::<F>(acc_bias, l, red, partials, at, s_bias);
    }
    sync_cube();
    let mut p = UNIT_POS as usize;
    while p < np {
        partials[row + p] *= scale;
        p += comptime!(s_bias.units);
    }
}
