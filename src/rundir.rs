//! A run's output folder (`train --out DIR`): a run owns its folder, so no run
//! loses another's work. A new run takes an empty or new folder only; a folder
//! that holds anything is continued with `--resume DIR` or left alone. While a
//! run works in its folder it holds an advisory lock (`flock` on `DIR/.lock`,
//! released by the kernel even on kill -9), so two runs never share one.
//! `run.json` is written last and names the model's checksum: a folder with
//! `run.json` holds a finished run whose model and record belong together.

use crate::config::TrainConfig;
use crate::error::{FerroError, Result};
use serde_json::Value;
use std::fs::File;
use std::path::{Path, PathBuf};

/// The lock file's name; it is the only file a claimed folder may hold before
/// the run writes its own.
const LOCK: &str = ".lock";

/// A folder held by this run until the value is dropped (or the process ends).
#[derive(Debug)]
pub struct RunDir {
    /// The folder.
    pub path: PathBuf,
    _lock: File,
}

/// What an existing folder holds, for the message that refuses it.
fn contents(dir: &Path) -> Result<Vec<String>> {
    let rd = std::fs::read_dir(dir).map_err(|source| FerroError::Io {
        action: "reading folder",
        path: dir.display().to_string(),
        source,
    })?;
    let mut names: Vec<String> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n != LOCK && !(n.starts_with('.') && n.contains(".tmp")))
        .collect();
    names.sort();
    Ok(names)
}

fn lock(dir: &Path) -> Result<File> {
    crate::io::lock(&dir.join(LOCK), false)?.ok_or_else(|| FerroError::File {
        path: dir.display().to_string(),
        detail:
            "another ferrofit run is working in this folder: wait for it, or choose another --out"
                .into(),
    })
}

impl RunDir {
    /// Takes `dir` for a new run: it must be new or empty.
    pub fn claim(dir: &Path) -> Result<RunDir> {
        if dir.exists() && !dir.is_dir() {
            return Err(FerroError::arg(
                "out",
                dir.display(),
                "that is a file: --out names a folder for the model, run.json and checkpoints",
            ));
        }
        let lock = lock(dir)?;
        let held = contents(dir)?;
        if !held.is_empty() {
            let (what, fix) = if held.iter().any(|n| n == "run.json") {
                ("a finished run", String::new())
            } else if held.iter().any(|n| n == "checkpoints") {
                (
                    "an unfinished run",
                    format!("continue it with `--resume {}`, or ", dir.display()),
                )
            } else {
                ("other files", String::new())
            };
            return Err(FerroError::arg(
                "out",
                dir.display(),
                format!(
                    "that folder already holds {what} ({}), and a run never writes over another's: {fix}choose a new or empty --out folder",
                    held.join(", "),
                ),
            ));
        }
        Ok(RunDir {
            path: dir.to_path_buf(),
            _lock: lock,
        })
    }

    /// Takes `dir` to continue the run whose checkpoints it holds; a finished
    /// run (its `run.json` written) has nothing left to continue.
    pub fn reopen(dir: &Path) -> Result<RunDir> {
        if !dir.is_dir() {
            return Err(FerroError::arg(
                "resume",
                dir.display(),
                "no such folder: --resume takes the --out folder of a checkpointed run",
            ));
        }
        let lock = lock(dir)?;
        if dir.join("run.json").exists() {
            return Err(FerroError::arg(
                "resume",
                dir.display(),
                "that run finished (its run.json is written): nothing to continue; \
                 train again with a new --out folder",
            ));
        }
        Ok(RunDir {
            path: dir.to_path_buf(),
            _lock: lock,
        })
    }
}

/// Settings that steer a run without changing what it computes: a resume may
/// give new ones (see [`resumed`]). Names as the job serialises (flattened).
const CONTROLS: [&str; 3] = ["log_every", "max_seconds", "checkpoint_every"];

/// The saved job, with the run controls the flags give (the flags that differ
/// from `defaults`, what no flags give).
pub fn resumed(given: &TrainConfig, defaults: &TrainConfig, saved: &TrainConfig) -> TrainConfig {
    let mut out = saved.clone();
    let (g, d) = (&given.run, &defaults.run);
    if g.log_every != d.log_every {
        out.run.log_every = g.log_every;
    }
    if g.max_seconds != d.max_seconds {
        out.run.max_seconds = g.max_seconds;
    }
    if g.checkpoint_every != d.checkpoint_every {
        out.run.checkpoint_every = g.checkpoint_every;
    }
    out
}

/// Job settings the command line gives that differ from a resumed run's saved
/// job (run controls aside): `given` is the flags' configuration, `defaults`
/// what no flags give (so only flags the user typed count). Each as
/// `name: saved A, given B`.
pub fn conflicts(given: &TrainConfig, defaults: &TrainConfig, saved: &TrainConfig) -> Vec<String> {
    fn leaves(v: &Value, at: String, out: &mut Vec<(String, Value)>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    let name = if at.is_empty() {
                        k.clone()
                    } else {
                        format!("{at}.{k}")
                    };
                    leaves(x, name, out);
                }
            }
            _ => out.push((at, v.clone())),
        }
    }
    let json = |c: &TrainConfig| serde_json::to_value(c).unwrap_or(Value::Null);
    let (g, d, s) = (json(given), json(defaults), json(saved));
    let at = |v: &Value, path: &str| {
        path.split('.')
            .try_fold(v, |v, k| v.get(k))
            .cloned()
            .unwrap_or(Value::Null)
    };
    let mut out = Vec::new();
    leaves(&g, String::new(), &mut out);
    out.into_iter()
        .filter(|(path, _)| !CONTROLS.contains(&path.as_str()))
        .filter(|(path, v)| *v != at(&d, path) && *v != at(&s, path))
        .map(|(path, v)| format!("{path}: saved {}, given {v}", at(&s, &path)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_typed_flags_that_differ_from_the_saved_job_conflict() {
        let defaults = TrainConfig::default();
        let saved = TrainConfig {
            lr: 0.05,
            ..TrainConfig::default()
        };
        // No flags, or flags equal to the saved job: nothing.
        assert!(conflicts(&defaults, &defaults, &saved).is_empty());
        assert!(conflicts(&saved, &defaults, &saved).is_empty());
        let given = TrainConfig {
            steps: 7,
            ..saved.clone()
        };
        let c = conflicts(&given, &defaults, &saved);
        assert_eq!(c.len(), 1, "{c:?}");
        assert!(c[0].starts_with("steps: saved"), "{c:?}");
        // Run controls are no conflict: the resumed job takes them.
        let mut given = saved.clone();
        given.run.max_seconds = Some(1.0);
        given.run.log_every = 7;
        assert!(conflicts(&given, &defaults, &saved).is_empty());
        let r = resumed(&given, &defaults, &saved);
        assert_eq!(
            (r.run.max_seconds, r.run.log_every, r.lr),
            (Some(1.0), 7, 0.05)
        );
    }

    #[test]
    fn a_folder_is_claimed_once_and_only_when_empty() {
        let root = std::env::temp_dir().join(format!("ferrofit-rundir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let dir = root.join("run");
        let held = RunDir::claim(&dir).unwrap();
        // A second run in the same folder while the first holds it.
        let e = RunDir::claim(&dir).unwrap_err().to_string();
        assert!(e.contains("another ferrofit run"), "{e}");
        drop(held);
        // Released: still empty (the lock file does not count), so claimable.
        drop(RunDir::claim(&dir).unwrap());
        std::fs::create_dir_all(dir.join("checkpoints")).unwrap();
        let e = RunDir::claim(&dir).unwrap_err().to_string();
        assert!(
            e.contains("unfinished run") && e.contains("--resume"),
            "{e}"
        );
        drop(RunDir::reopen(&dir).unwrap());
        std::fs::write(dir.join("run.json"), "{}").unwrap();
        let e = RunDir::reopen(&dir).unwrap_err().to_string();
        assert!(e.contains("finished"), "{e}");
        let file = root.join("f");
        std::fs::write(&file, "x").unwrap();
        assert!(RunDir::claim(&file)
            .unwrap_err()
            .to_string()
            .contains("file"));
        std::fs::remove_dir_all(root).unwrap();
    }
}
