//! The fused GPU engine's device memory: the data, the master weights and
//! optimizer moments, the gradient carried between micro-batches, the cubes'
//! partial rows and the loss read-back slot. Allocated once per engine.

use crate::task::Dataset;
use cubecl::prelude::*;
use cubecl::server::Handle;

/// Every buffer of one engine, on its device.
pub struct Buffers {
    /// Inputs, `n × inputs`.
    pub x: Handle,
    /// Targets, `n × outputs`.
    pub y: Handle,
    /// A one-value index list for range batches (kernels need an array there).
    pub no_idx: Handle,
    /// Master weights, `np`.
    pub params: Handle,
    /// The weights as half-precision products take them, `np`: in the operand
    /// type (the tensor-core pass) or rounded to it in f32 (emulated).
    pub half: Handle,
    /// First and second optimizer moments, `np + 1` each.
    pub m: Handle,
    /// Adam's second moments (np + 1).
    pub v: Handle,
    /// The gradient (and loss) carried between micro-batches, `np + 1`.
    pub carry: Handle,
    /// One partial gradient row per cube, `max_cubes × (np + 1)`.
    pub partials: Handle,
    /// `[loss of the last step, 1 if a persistent launch failed]`.
    pub loss_out: Handle,
}

impl Buffers {
    /// Uploads `data` and the flat weights `flat`; zero moments and carry.
    pub fn upload<R: Runtime>(
        client: &ComputeClient<R>,
        data: &Dataset,
        flat: &[f32],
        max_cubes: usize,
    ) -> Buffers {
        let np = flat.len();
        let zeros = vec![0f32; np + 1];
        Buffers {
            x: client.create_from_slice(pod_bytes(&data.x)),
            y: client.create_from_slice(pod_bytes(&data.y)),
            no_idx: client.create_from_slice(&[0u8; 4]),
            params: client.create_from_slice(pod_bytes(flat)),
            half: client.empty((np * 4).max(4)),
            m: client.create_from_slice(pod_bytes(&zeros)),
            v: client.create_from_slice(pod_bytes(&zeros)),
            carry: client.create_from_slice(pod_bytes(&zeros)),
            partials: client.empty(max_cubes * (np + 1) * 4),
            loss_out: client.create_from_slice(pod_bytes(&[f32::NAN, 0.0])),
        }
    }
}

/// The bytes of a slice of plain numbers (`f32`, `u32`).
pub(crate) fn pod_bytes<T: Copy + 'static>(v: &[T]) -> &[u8] {
    // SAFETY: only called with f32/u32, which have no padding; any byte pattern is a valid u8.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

/// Lets the runtime release the host copies of the uploads before training.
/// CubeCL keeps an upload's host bytes until a second flush after it, and
/// flushes when a launch finds enough staged, so without this the copies of
/// the data were freed inside a later run's timed steps: on the H200, runs
/// after the first in one process took 64–88 ms at N = 1e8 on CUDA against
/// the first's 41 ms (each 41.4 ms with it). Two flushes, each waited for,
/// free them here, in the set-up.
pub(super) fn settle<R: Runtime>(client: &ComputeClient<R>) {
    for _ in 0..2 {
        // A failure here shows again at the first step, where it is reported.
        let _ = client.flush();
        let _ = cubecl::future::block_on(client.sync());
    }
}
