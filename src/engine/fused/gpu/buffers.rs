//! The fused GPU engine's device memory: the data, the master weights and
//! optimizer moments, the gradient carried between micro-batches, the cubes'
//! partial rows and the loss read-back slot. Allocated once per engine.

use crate::engine::fused::gpu::pod_bytes;
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
    /// The weights in a half-precision operand type, `np` (the tensor-core pass).
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
            half: client.empty((np * 2).max(4)),
            m: client.create_from_slice(pod_bytes(&zeros)),
            v: client.create_from_slice(pod_bytes(&zeros)),
            carry: client.create_from_slice(pod_bytes(&zeros)),
            partials: client.empty(max_cubes * (np + 1) * 4),
            loss_out: client.create_from_slice(pod_bytes(&[f32::NAN, 0.0])),
        }
    }
}
