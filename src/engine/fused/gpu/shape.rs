//! What a fused GPU kernel is compiled for, as two comptime values every
//! kernel takes: [`Shape`] (the model and its training rule — typed
//! activation, loss and optimizer, the layer sizes) and [`Pass`] (how this
//! device runs a pass: plane reductions, scratch, loads ahead, lanes, tile,
//! the tiled kernel's register [`Blocks`], the tensor-core [`Plan`]).
//! CubeCL compiles one kernel per distinct pair, so a field here is a
//! specialisation, not a branch at run time.

use crate::config::{Activation, Loss, OptimizerKind, TrainConfig};
use crate::engine::fused::half::Half;

/// The model a kernel trains and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    /// Input features a point.
    pub inputs: usize,
    /// Width of every hidden layer.
    pub hidden: usize,
    /// Number of hidden layers.
    pub layers: usize,
    /// Targets a point.
    pub outputs: usize,
    /// Hidden-layer activation.
    pub act: Activation,
    /// Training loss.
    pub loss: Loss,
    /// Optimizer.
    pub opt: OptimizerKind,
}

impl Shape {
    /// The shape of `cfg`'s model and training rule.
    pub fn of(cfg: &TrainConfig) -> Shape {
        Shape {
            inputs: cfg.model.inputs,
            hidden: cfg.model.hidden,
            layers: cfg.model.layers,
            outputs: cfg.model.outputs,
            act: cfg.model.activation,
            loss: cfg.loss,
            opt: cfg.optimizer,
        }
    }

    /// A model of `hidden` × `layers` from `io.0` inputs to `io.1` outputs,
    /// activation `act`, MSE and SGD: the planners' tests' shapes.
    #[cfg(test)]
    pub fn mse_sgd(io: (usize, usize), hidden: usize, layers: usize, act: Activation) -> Shape {
        Shape {
            inputs: io.0,
            hidden,
            layers,
            outputs: io.1,
            act,
            loss: Loss::Mse,
            opt: OptimizerKind::Sgd,
        }
    }

    /// Parameters of the model (`Params::flatten`'s length): each layer's
    /// weights and biases.
    pub fn params(&self) -> usize {
        let h = self.hidden;
        self.inputs * h
            + h
            + self.layers.saturating_sub(1) * (h * h + h)
            + self.outputs * h
            + self.outputs
    }
}

/// How a kernel runs its pass on this device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Pass {
    /// Points come from an index list rather than a range.
    pub use_idx: bool,
    /// Reductions use plane (warp, subgroup) sums.
    pub plane: bool,
    /// Lanes of the reduce-scatter that sums a unit's gradient row over each
    /// plane ([`crate::engine::fused::gpu::kernels::ops::cube_rows`]): the
    /// smallest plane of the device, at most 32; 0 for one plane sum per value.
    pub scatter: usize,
    /// Shared-memory scratch of the reductions, in values.
    pub scratch: usize,
    /// Points a unit loads at once.
    pub ahead: usize,
    /// Units sharing each point (1: one unit per point).
    pub lanes: usize,
    /// Points per tile (the tiled and tensor-core kernels).
    pub tile: usize,
    /// How the tiled kernel's units share out each layer's products.
    pub blocks: Blocks,
    /// The gradient pass runs on tensor cores (`kernels::tensor`), laid out
    /// as this plan says (`tensor_plan`).
    pub tensor: Option<Plan>,
    /// Half-precision operands emulated on the f32 tiled kernel
    /// (`kernels::round`): f16/bf16 where no tensor-core pass runs.
    pub half: Option<Half>,
    /// CubeCL compiles the kernel to SPIR-V (Vulkan): a plane barrier there
    /// orders no shared memory, so the tensor-core pass's planes hand their
    /// scratch over at the cube's (`kernels::mma::handoff`), and vector views
    /// of shared memory come out as invalid SPIR-V, so its sums, first layer
    /// and output layer read and write shared memory a value at a time.
    pub spirv: bool,
}

/// The register blocks of the tiled kernel's layer passes (chosen in
/// `tiled_plan`): each unit computes `points` × `units` outputs of a forward
/// or δ product, and `grad_u` × `grad_k` weight-gradient entries, at a time,
/// so every value it loads serves several multiply-adds; `cube` units a cube.
/// `lined`: the hidden layers' passes load four values at a time
/// (`kernels::lined`; blocks of `points` × 4 and 4 × `grad_k`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Blocks {
    /// Points of a forward or δ block.
    pub points: usize,
    /// Output units (forward) or inputs (δ) of the block.
    pub units: usize,
    /// Output units of a weight-gradient block.
    pub grad_u: usize,
    /// Inputs of a weight-gradient block.
    pub grad_k: usize,
    /// Units a cube.
    pub cube: usize,
    /// The hidden layers' products load 16-byte lines (`kernels::lined`).
    pub lined: bool,
    /// The one-value passes' weight-gradient blocks read their entries of
    /// the cube's partial row before their Σ over the tile instead of after
    /// it (the same sums, bit for bit; `FERROFIT_ROWS_AHEAD=1`, for
    /// measuring; the lined passes, whose blocks are twice as large, would
    /// spill: 106 → 128 registers and 88 bytes spilled at 4 × 128).
    pub rows_ahead: bool,
}

impl Default for Blocks {
    /// 4 × 4 everywhere, 256 units a cube, one value a load.
    fn default() -> Self {
        Blocks {
            points: 4,
            units: 4,
            grad_u: 4,
            grad_k: 4,
            cube: 256,
            lined: false,
            rows_ahead: false,
        }
    }
}

/// A layout of the tensor-core pass (chosen in `tensor_plan`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Plan {
    /// Points a tile.
    pub tile: usize,
    /// The hidden-to-hidden weights read from global memory, not shared.
    pub streamed: bool,
    /// Units a cube.
    pub units: usize,
    /// The products on registers (manual MMA, `ldmatrix`: `kernels::mma_regs`),
    /// else through CubeCL's `cmma` fragments (`kernels::mma`).
    pub regs: bool,
    /// Each plane takes its own 16 points through every layer
    /// (`kernels::strips`; products on registers), else the planes share
    /// each product's output blocks (`kernels::tensor`).
    pub strips: bool,
    /// The top hidden layers whose weight gradients each plane keeps in its
    /// registers over the launch (`kernels::held`; shared-output pass on
    /// registers only), not added into the partial row every tile.
    pub held: usize,
    /// The bias and first-layer sums made in the down products' epilogue
    /// from their f32 δ (`kernels::colsums`; shared-output pass on registers
    /// only), not read back from the δ rows every tile (`kernels::sums`).
    pub down_sums: bool,
}

/// Whether d act / dz needs z itself (silu, gelu); the others follow from act(z).
pub fn keeps_z(act: Activation) -> bool {
    matches!(act, Activation::Silu | Activation::Gelu)
}

/// Whether the optimizer keeps Adam's two moments.
pub fn is_adam(opt: OptimizerKind) -> bool {
    matches!(opt, OptimizerKind::Adam | OptimizerKind::Adamw)
}
