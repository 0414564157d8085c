//! Data parallelism's collective: registers a peer, all-reduces (sums) flat
//! vectors through `burn-collective`, and closes the session. Every peer calls
//! from its own thread.
//!
//! The collective runs on Burn's CPU backend whatever the replicas' devices:
//! a fused gradient is at most a few hundred values (the GPU envelope) and
//! each replica reads it back to the host anyway, so summing it there costs no
//! device transfers. On the replicas' GPU backends, burn-collective's local
//! server moved each tiny tensor host → device → host per step (~0.6 ms a step
//! on 2× H200, docs/PERFORMANCE.md). The backend is `platform::Host`.

use super::platform::Host;
use crate::error::{FerroError, Result};
use burn::tensor::{Tensor, TensorPrimitive};
use burn_collective::{CollectiveConfig, PeerId, ReduceOperation};

fn failed(e: impl std::fmt::Debug) -> FerroError {
    FerroError::BackendFailed {
        backend: "burn-collective".into(),
        detail: format!("{e:?}"),
    }
}

/// Joins peer `id` of `peers` to the collective.
pub fn register(id: u32, peers: usize) -> Result<()> {
    let config = CollectiveConfig::default().with_num_devices(peers);
    burn_collective::register::<Host>(PeerId(id), Default::default(), config).map_err(failed)
}

/// The element-wise sum of `v` over every peer.
pub fn sum(id: u32, v: &[f32]) -> Result<Vec<f32>> {
    let t = Tensor::<Host, 1>::from_floats(v, &Default::default());
    let r = burn_collective::all_reduce::<Host>(
        PeerId(id),
        t.into_primitive().tensor(),
        ReduceOperation::Sum,
    )
    .map_err(failed)?;
    Tensor::<Host, 1>::from_primitive(TensorPrimitive::Float(r))
        .into_data()
        .to_vec::<f32>()
        .map_err(failed)
}

/// Leaves the collective (every peer, at the end of a run).
pub fn finish(id: u32) {
    let _ = burn_collective::finish_collective::<Host>(PeerId(id));
}

/// Forgets every peer (before a new run in the same process).
pub fn reset() {
    burn_collective::reset_collective::<Host>();
}
