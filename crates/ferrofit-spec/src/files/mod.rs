//! The byte formats of the files ferrofit writes and reads back, with no I/O:
//! the model (`model.safetensors`, PyTorch's layout) and the resumable
//! checkpoint. Decoding checks every field and never panics or allocates more
//! than the bytes given describe, so it is fuzzed on arbitrary bytes
//! (`fuzz/fuzz_targets/{model,checkpoint}.rs`). The main crate adds the
//! files themselves: atomic writes, rotation, the run record beside a model.

pub mod checkpoint;
pub mod model;

use safetensors::tensor::{Dtype, TensorView};
use std::collections::HashMap;

/// A named f32 tensor: name, shape, little-endian bytes.
pub type Tensor = (String, Vec<usize>, Vec<u8>);

/// FNV-1a over `chunks` in order: the checksum of checkpoints and of the model
/// a run record names (damage, not tampering, is what it catches).
pub fn fnv1a(chunks: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for c in chunks {
        for &b in *c {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// f32 values as little-endian bytes.
pub fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Little-endian bytes as f32 values.
pub fn floats(d: &[u8]) -> Vec<f32> {
    d.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Named f32 tensors and a header as safetensors bytes.
pub fn serialize(
    tensors: &[Tensor],
    metadata: HashMap<String, String>,
) -> std::result::Result<Vec<u8>, String> {
    let views = tensors
        .iter()
        .map(|(n, s, b)| {
            TensorView::new(Dtype::F32, s.clone(), b)
                .map(|v| (n.clone(), v))
                .map_err(|e| format!("{n}: {e}"))
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    safetensors::serialize(views, Some(metadata)).map_err(|e| e.to_string())
}

/// The header entries of safetensors bytes (none when it has no header map).
pub fn metadata(data: &[u8]) -> std::result::Result<HashMap<String, String>, String> {
    let (_, meta) = safetensors::SafeTensors::read_metadata(data).map_err(|e| e.to_string())?;
    Ok(meta.metadata().clone().unwrap_or_default())
}
