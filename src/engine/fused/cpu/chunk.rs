//! The unit of the fused CPU step's parallel work: a [`Chunk`] of the batch
//! (a contiguous range of points, taken in blocks of [`BLOCK`]). Its passes
//! are in [`crate::engine::fused::cpu::kernel`] (the seed shape, the
//! dispatch) and [`crate::engine::fused::cpu::block`] (any model).

use crate::batches::Batch;
use crate::config::{Activation, Loss};
use crate::engine::fused::half::Half;
use crate::model::Params;
use crate::task::Dataset;

/// Points per block (the vector loop length).
pub const BLOCK: usize = 64;

/// One parallel task: a contiguous range of the batch.
pub(crate) struct Chunk<'a> {
    pub(crate) params: &'a Params,
    pub(crate) act: Activation,
    pub(crate) lossk: Loss,
    pub(crate) data: &'a Dataset,
    pub(crate) batch: &'a Batch,
    pub(crate) scale: f32,
    /// Half-precision operands of the hidden-to-hidden products (`half`).
    pub(crate) half: Option<Half>,
    pub(crate) first: usize,
    pub(crate) last: usize,
}
