//! Data parallelism's collective: registers a peer, all-reduces (sums) flat
//! vectors through `burn-collective` on the Burn backend of the peer's device,
//! and closes the session. Every peer calls from its own thread. Besides
//! `dispatch`, the only file naming Burn backends.

use super::select::Target;
use crate::backend::BackendKind;
use crate::error::{FerroError, Result};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorPrimitive};
use burn_collective::{CollectiveConfig, PeerId, ReduceOperation};

fn failed(e: impl std::fmt::Debug) -> FerroError {
    FerroError::BackendFailed {
        backend: "burn-collective".into(),
        detail: format!("{e:?}"),
    }
}

fn register_on<B: Backend>(id: u32, peers: usize, device: B::Device) -> Result<()> {
    let config = CollectiveConfig::default().with_num_devices(peers);
    burn_collective::register::<B>(PeerId(id), device, config).map_err(failed)
}

fn sum_on<B: Backend>(id: u32, v: &[f32], device: &B::Device) -> Result<Vec<f32>> {
    let t = Tensor::<B, 1>::from_floats(v, device);
    let r = burn_collective::all_reduce::<B>(
        PeerId(id),
        t.into_primitive().tensor(),
        ReduceOperation::Sum,
    )
    .map_err(failed)?;
    Tensor::<B, 1>::from_primitive(TensorPrimitive::Float(r))
        .into_data()
        .to_vec::<f32>()
        .map_err(failed)
}

/// Calls `$f::<B>(args, device)` with the Burn backend and device of `$t`.
macro_rules! on_backend {
    ($t:expr, $f:ident, $($arg:expr),*) => {
        match $t.kind {
            #[cfg(feature = "wgpu")]
            BackendKind::Wgpu => {
                let d = super::dispatch::wgpu_arm::device($t)?;
                $f::<burn::backend::Wgpu>($($arg,)* d)
            }
            #[cfg(feature = "cuda")]
            BackendKind::Cuda => $f::<burn::backend::Cuda>($($arg,)* super::dispatch::cuda::device($t)),
            _ => $f::<burn::backend::Flex>($($arg,)* Default::default()),
        }
    };
}

/// Joins peer `id` of `peers` to the collective of `t`'s backend.
pub fn register(t: &Target, id: u32, peers: usize) -> Result<()> {
    on_backend!(t, register_on, id, peers)
}

/// The element-wise sum of `v` over every peer.
pub fn sum(t: &Target, id: u32, v: &[f32]) -> Result<Vec<f32>> {
    fn by_value<B: Backend>(id: u32, v: &[f32], d: B::Device) -> Result<Vec<f32>> {
        sum_on::<B>(id, v, &d)
    }
    on_backend!(t, by_value, id, v)
}

/// Leaves the collective (every peer, at the end of a run).
pub fn finish(t: &Target, id: u32) {
    fn fin<B: Backend>(id: u32, _d: B::Device) -> Result<()> {
        burn_collective::finish_collective::<B>(PeerId(id)).map_err(failed)
    }
    let _ = (|| -> Result<()> { on_backend!(t, fin, id) })();
}

/// Forgets every peer of `t`'s backend (before a new run in the same process).
pub fn reset(t: &Target) {
    fn rst<B: Backend>(_d: B::Device) -> Result<()> {
        burn_collective::reset_collective::<B>();
        Ok(())
    }
    let _ = (|| -> Result<()> { on_backend!(t, rst,) })();
}
