//! Resumable checkpoints on disk: one file per checkpoint in the run folder's
//! `checkpoints/`, written atomically (temporary file, fsync, rename), the two
//! newest kept. The format — one checksum over header and tensors, only finite
//! state, every field checked on reading — is `ferrofit_spec::files::checkpoint`.
//! Loading takes the newest file that verifies and says which damaged ones it
//! passed over.

use crate::error::{FerroError, Result};
use crate::io::write_atomic;
pub use ferrofit_spec::files::checkpoint::{decode, encode, Checkpoint, OptState};
use std::path::{Path, PathBuf};

/// Checkpoints kept on disk (older ones are removed after a newer one is written).
const KEEP: usize = 2;

/// The folder inside a run's output folder.
pub fn folder(out: &Path) -> PathBuf {
    out.join("checkpoints")
}

/// Writes `c` into `dir` and removes all but the newest [`KEEP`] checkpoints.
/// Non-finite weights or optimizer state are refused (a checkpoint is a state
/// worth returning to).
pub fn write(dir: &Path, c: &Checkpoint) -> Result<PathBuf> {
    let data = encode(c)?;
    let path = file(dir, c.step);
    write_atomic(&path, &data)?;
    for old in list(dir).into_iter().rev().skip(KEEP) {
        let _ = std::fs::remove_file(old);
    }
    Ok(path)
}

/// The file of the checkpoint after `step` steps.
pub fn file(dir: &Path, step: usize) -> PathBuf {
    dir.join(format!("step-{step:09}.safetensors"))
}

/// Whether `dir` holds any checkpoint file.
pub fn any(dir: &Path) -> bool {
    !list(dir).is_empty()
}

/// Checkpoint files in `dir`, oldest first.
fn list(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("step-") && n.ends_with(".safetensors"))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Reads and verifies one checkpoint file.
pub fn read(path: &Path) -> std::result::Result<Checkpoint, String> {
    decode(&std::fs::read(path).map_err(|e| e.to_string())?)
}

/// The newest checkpoint in `dir` that verifies, and a note for each newer
/// one that did not.
pub fn latest(dir: &Path) -> Result<(Checkpoint, Vec<String>)> {
    let mut skipped = Vec::new();
    for path in list(dir).into_iter().rev() {
        match read(&path) {
            Ok(c) => return Ok((c, skipped)),
            Err(why) => skipped.push(format!(
                "{}: {why}; using the previous checkpoint",
                path.display()
            )),
        }
    }
    Err(FerroError::File {
        path: dir.display().to_string(),
        detail: if skipped.is_empty() {
            "no checkpoint here: train with --checkpoint-every K --out DIR, then --resume DIR"
                .into()
        } else {
            format!("no usable checkpoint ({})", skipped.join("; "))
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TrainConfig;
    use crate::model::Params;

    fn ckpt(step: usize) -> Checkpoint {
        let config = TrainConfig::default();
        let params = Params::init(&config.model, 9);
        let n = params.len();
        Checkpoint {
            step,
            params,
            opt: OptState {
                m: vec![0.5; n],
                v: vec![],
                t: step as i32,
            },
            device: ("wgpu".into(), 1),
            config,
        }
    }

    #[test]
    fn round_trips_keeps_two_and_passes_over_a_damaged_one() {
        let dir = std::env::temp_dir().join(format!("ferrofit-ckpt-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(latest(&dir)
            .unwrap_err()
            .to_string()
            .contains("--checkpoint-every"));
        for s in [10, 20, 30] {
            write(&dir, &ckpt(s)).unwrap();
        }
        assert_eq!(list(&dir).len(), KEEP);
        let (c, notes) = latest(&dir).unwrap();
        assert_eq!((c.clone(), notes.len()), (ckpt(30), 0));
        // Flip one byte of the newest file's data: the checksum catches it.
        let newest = list(&dir).pop().unwrap();
        let mut data = std::fs::read(&newest).unwrap();
        let last = data.len() - 3;
        data[last] ^= 0x40;
        std::fs::write(&newest, data).unwrap();
        let (c, notes) = latest(&dir).unwrap();
        assert_eq!(c.step, 20);
        assert!(notes[0].contains("checksum mismatch"), "{notes:?}");
        // A truncated file is passed over too.
        std::fs::write(&newest, b"\x10\x00").unwrap();
        assert_eq!(latest(&dir).unwrap().0.step, 20);
    }

    #[test]
    fn an_edited_header_or_non_finite_state_is_never_trusted() {
        let dir = std::env::temp_dir().join(format!("ferrofit-ckpt-hdr-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = write(&dir, &ckpt(30)).unwrap();
        // Edit the step in the header, same length: the tensors are untouched,
        // so a checksum of the tensors alone (format v1) passed it.
        let mut data = std::fs::read(&path).unwrap();
        let at = data
            .windows(11)
            .position(|w| w == br#""step":"30""#)
            .expect("the step in the header");
        data[at + 8] = b'2';
        std::fs::write(&path, &data).unwrap();
        assert!(
            read(&path).unwrap_err().contains("checksum"),
            "edited header read"
        );
        // Non-finite weights or moments are refused at writing.
        let mut bad = ckpt(40);
        bad.opt.m[3] = f32::INFINITY;
        assert!(matches!(
            write(&dir, &bad),
            Err(FerroError::Diverged { .. })
        ));
        bad = ckpt(40);
        bad.params.layers[0].w[0] = f32::NAN;
        assert!(matches!(
            write(&dir, &bad),
            Err(FerroError::Diverged { .. })
        ));
        // Fields that disagree with the saved configuration are named.
        let mut short = ckpt(50);
        short.opt.m.pop();
        let p = write(&dir, &short).unwrap();
        assert!(
            read(&p).unwrap_err().contains("optim.m holds"),
            "short moments read"
        );
        let mut late = ckpt(50);
        late.step = late.config.steps + 1;
        let p = write(&dir, &late).unwrap();
        assert!(
            read(&p).unwrap_err().contains("outside the run"),
            "step past the end read"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
