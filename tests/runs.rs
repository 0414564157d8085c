//! Nothing lost: run folders that a second run cannot take over, resumes that
//! continue the same job, kill -9 at random moments, Ctrl-C, damaged
//! checkpoints, and the NaN guard with its checkpoints — through the binary.

mod common;

use common::{bin, ferrofit};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

fn final_loss(stdout: &str) -> f64 {
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    v["final_loss"].as_f64().unwrap()
}

/// Checkpoint files in `dir/checkpoints`, oldest first.
fn checkpoints(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("checkpoints"))
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "safetensors"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Waits until `dir` holds a checkpoint file.
fn wait_for_checkpoint(dir: &Path) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        if !checkpoints(dir).is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no checkpoint appeared in {}", dir.display());
}

/// A long checkpointed CPU run into `out` (stderr piped), once its first
/// checkpoint is written.
fn long_run(out: &Path) -> std::process::Child {
    let child = bin()
        .args("train --backend cpu --n 100000 --steps 100000".split(' '))
        .args(["--checkpoint-every", "20", "--out", out.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_checkpoint(out);
    child
}

/// Every file under `dir` with its bytes (the lock file aside).
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()) {
        if e.is_dir() {
            out.extend(snapshot(&e));
        } else if !e.ends_with(".lock") {
            out.push((e.clone(), std::fs::read(&e).unwrap()));
        }
    }
    out.sort();
    out
}

#[test]
fn a_used_out_folder_is_refused_and_a_resume_continues_the_same_job() {
    let dir = common::fresh_dir("runs-own");
    let out = dir.join("run");
    let o = out.to_str().unwrap();
    let job = ["train", "--backend", "cpu", "--n", "2000", "--json"];
    let into_out = |steps: &str, every: &str| {
        let more = ["--steps", steps, "--checkpoint-every", every, "--out", o];
        ferrofit(&[&job[..], &more[..]].concat())
    };
    let (code, stdout, stderr) = into_out("40", "10");
    assert_eq!(code, 0, "{stderr}");
    let want = final_loss(&stdout);
    // A shorter run into the same folder used to delete its own checkpoints
    // (rotation kept the old run's higher steps) and replace the old model.
    let before = snapshot(&out);
    let (code, _, stderr) = into_out("20", "5");
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--out") && stderr.contains("finished run"),
        "{stderr}"
    );
    assert_eq!(snapshot(&out), before, "the finished run was changed");
    // Unfinished (no run.json yet): refused too, with --resume named.
    std::fs::remove_file(out.join("run.json")).unwrap();
    let before = snapshot(&out);
    let (code, _, stderr) = into_out("20", "5");
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains(&format!("--resume {o}")), "{stderr}");
    // A resume whose flags change the job is refused, naming the setting.
    let (code, _, stderr) = ferrofit(&["train", "--resume", o, "--lr", "0.1"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("lr: saved 0.2, given 0.1"), "{stderr}");
    assert_eq!(snapshot(&out), before, "a refused command changed the run");
    // A plain resume says what it continues and reaches the same loss.
    let (code, stdout, stderr) = ferrofit(&["train", "--json", "--resume", o]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("step-000000030.safetensors (step 30 of 40)"),
        "{stderr}"
    );
    assert_eq!(final_loss(&stdout), want);
    // The model and its record belong together: another run's model is refused.
    let other = dir.join("other");
    let (code, _, stderr) = common::train_cpu("500", "3", &["--out", other.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    std::fs::copy(
        other.join("model.safetensors"),
        out.join("model.safetensors"),
    )
    .unwrap();
    let (code, _, stderr) = ferrofit(&["predict", "--model", o, "--x", "0.5"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("another run"), "{stderr}");
}

/// A tiny deterministic generator for the kill moments (printed, so a failing
/// moment can be replayed).
fn moments(seed: u64, k: usize, max_ms: u64) -> Vec<u64> {
    let mut s = seed;
    (0..k)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 33) % max_ms
        })
        .collect()
}

/// kill -9 at 20 random moments of one checkpointed run (each resume is the
/// next one killed), then a damaged newest checkpoint: the run still ends at
/// the uninterrupted loss, bit for bit on the CPU.
#[test]
fn kill_9_at_twenty_random_moments_resumes_to_the_uninterrupted_loss() {
    let dir = common::fresh_dir("runs-kill");
    // (backend, tolerance); the waits before the kills are scaled to the
    // uninterrupted run's time, so no resumed run can reach the end first.
    let mut backends = vec![("cpu", 0.0)];
    if std::env::var("FERROFIT_REQUIRE_WGPU").is_ok_and(|v| v == "1") {
        backends.push(("wgpu", 1e-4));
    }
    let seed = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    for (backend, tol) in backends {
        let job = format!("--backend {backend} --n 100000 --steps 20000 --optimizer adam");
        let job: Vec<&str> = job.split(' ').collect();
        let whole = dir.join(format!("{backend}-whole"));
        let mut args = vec!["train", "--json", "--out", whole.to_str().unwrap()];
        args.extend(&job);
        let started = Instant::now();
        let (code, stdout, stderr) = ferrofit(&args);
        let whole_ms = started.elapsed().as_millis() as u64;
        assert_eq!(code, 0, "{stderr}");
        let want = final_loss(&stdout);
        // Twenty waits of at most a 25th of the whole run add up to under
        // 80 % of it, and each resumed run spends its start-up before any
        // step: the steps done before the last kill stay short of the end.
        let max_ms = (whole_ms / 25).max(20);
        let cut = dir.join(format!("{backend}-cut"));
        let c = cut.to_str().unwrap();
        let first = [
            &["train", "--checkpoint-every", "50", "--out", c][..],
            &job[..],
        ]
        .concat();
        let resume = ["train", "--resume", c];
        let at = moments(seed, 20, max_ms);
        eprintln!("{backend}: whole run {whole_ms} ms; seed {seed}, kills after {at:?} ms");
        for (i, ms) in at.iter().enumerate() {
            let args: &[&str] = if i == 0 { &first } else { &resume };
            let mut child = bin()
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            if i == 0 {
                wait_for_checkpoint(&cut);
            }
            std::thread::sleep(Duration::from_millis(*ms));
            child.kill().unwrap(); // SIGKILL
            let status = child.wait().unwrap();
            assert!(
                !status.success(),
                "{backend}: run {i} ended before its kill"
            );
        }
        // Damage the newest checkpoint: resume passes over it and says so.
        std::fs::write(checkpoints(&cut).last().unwrap(), b"\x00damaged").unwrap();
        let (code, stdout, stderr) = ferrofit(&["train", "--json", "--resume", c]);
        assert_eq!(code, 0, "{stderr}");
        assert!(stderr.contains("using the previous checkpoint"), "{stderr}");
        let got = final_loss(&stdout);
        assert!(
            (got - want).abs() <= tol * want,
            "{backend}: resumed {got} vs uninterrupted {want} (seed {seed})"
        );
    }
}

#[test]
fn ctrl_c_writes_a_checkpoint_of_that_moment_and_stops_cleanly() {
    let dir = common::fresh_dir("runs-int");
    let out = dir.join("run");
    let child = long_run(&out);
    let before = checkpoints(&out).last().cloned().unwrap();
    // SAFETY: plain kill(2) of our own child.
    unsafe { libc_kill(child.id() as i32, 2) };
    let res = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert_eq!(res.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("Ctrl-C") && stderr.contains("--resume"),
        "{stderr}"
    );
    // The checkpoint it names is of the step it stopped at — not older than
    // any from before the signal — and a resume continues from that step.
    let step: usize = stderr
        .split("stopped at step ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{stderr}"));
    let file = out.join(format!("checkpoints/step-{step:09}.safetensors"));
    assert!(stderr.contains(&*file.to_string_lossy()), "{stderr}");
    assert!(
        file >= before,
        "{} is older than {}",
        file.display(),
        before.display()
    );
    let resume = bin()
        .args([
            "train",
            "--resume",
            out.to_str().unwrap(),
            "--max-seconds",
            "0.01",
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&resume.stderr);
    assert!(resume.status.success(), "{said}");
    assert!(said.contains(&format!("(step {step} of 100000)")), "{said}");
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

#[test]
fn a_diverging_run_stops_within_a_step_and_keeps_only_finite_checkpoints() {
    let dir = common::fresh_dir("runs-nan");
    let diverge = |out: &Path, every: &str| {
        common::train_cpu(
            "2000",
            "200",
            &[
                "--lr",
                "1e6",
                "--log-every",
                "100",
                "--checkpoint-every",
                every,
                "--out",
                out.to_str().unwrap(),
            ],
        )
    };
    let out = dir.join("run");
    let (code, _, stderr) = diverge(&out, "1");
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("lower --lr") && stderr.contains("--clip-grad"),
        "{stderr}"
    );
    assert!(stderr.contains("last good checkpoint"), "{stderr}");
    // Detected at the first non-finite step, not at the next log point (step 99).
    let step: usize = stderr
        .split("at step ")
        .nth(1)
        .and_then(|s| s.split(':').next())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(step < 99, "{stderr}");
    // Every checkpoint kept is finite, so the resume starts from real weights.
    let (code, _, stderr) = ferrofit(&["train", "--resume", out.to_str().unwrap()]);
    assert!(stderr.contains("resuming"), "{stderr}");
    assert_eq!(code, 1, "diverges again from the same state: {stderr}");
    // Diverged before its first checkpoint: no "last good checkpoint" promised.
    let (code, _, stderr) = diverge(&dir.join("early"), "150");
    assert_eq!(code, 1, "{stderr}");
    assert!(!stderr.contains("last good checkpoint"), "{stderr}");
    assert!(stderr.contains("before its first checkpoint"), "{stderr}");
    // The advice works: clipped Adam on the same job trains.
    let (code, _, stderr) = common::train_cpu(
        "2000",
        "200",
        &["--clip-grad", "0.1", "--optimizer", "adam", "--lr", "0.01"],
    );
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn a_second_run_in_a_working_folder_is_refused_while_the_first_runs() {
    let dir = common::fresh_dir("runs-two");
    let out = dir.join("run");
    let o = out.to_str().unwrap();
    let mut first = long_run(&out);
    // Both a new run and a resume of the same folder, while it trains.
    for args in [&["train", "--resume", o][..], &["train", "--out", o]] {
        let (code, _, stderr) = ferrofit(args);
        assert_eq!(code, 2, "{stderr}");
        assert!(stderr.contains("another ferrofit run"), "{stderr}");
    }
    first.kill().unwrap();
    first.wait().unwrap();
    // Its lock died with it: the folder resumes.
    let (code, _, stderr) = ferrofit(&["train", "--resume", o, "--max-seconds", "0.01"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("resuming"), "{stderr}");
}

/// Mounts a 64 KiB tmpfs (root only; skipped elsewhere): a full disk and a
/// read-only folder fail with the cause named, leaving no temporary files.
#[test]
fn a_full_disk_or_a_read_only_folder_fails_cleanly() {
    let dir = common::fresh_dir("runs-disk");
    let tiny = dir.join("tiny");
    std::fs::create_dir_all(&tiny).unwrap();
    let mount = |args: &[&str]| {
        std::process::Command::new("mount")
            .args(args)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let t = tiny.to_str().unwrap();
    if !mount(&["-t", "tmpfs", "-o", "size=64k", "tmpfs", t]) {
        common::skip(
            "a_full_disk_or_a_read_only_folder_fails_cleanly",
            "mounting a tmpfs needs root",
        );
        return;
    }
    let run = tiny.join("run");
    // 17k weights: a model of 68 KiB, more than the disk holds.
    let more = [
        "--hidden",
        "128",
        "--layers",
        "2",
        "--checkpoint-every",
        "5",
    ];
    let out = ["--out", run.to_str().unwrap()];
    let (code, _, stderr) = common::train_cpu("2000", "20", &[&more[..], &out[..]].concat());
    let leftovers: Vec<_> = std::fs::read_dir(run.join("checkpoints"))
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    let ro = mount(&["-o", "remount,ro", t]);
    let (ro_code, _, ro_stderr) =
        common::train_cpu("2000", "5", &["--out", tiny.join("ro").to_str().unwrap()]);
    assert!(mount(&["-o", "remount,rw", t]) || !ro);
    std::process::Command::new("umount")
        .arg(t)
        .status()
        .unwrap();
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    assert_eq!(
        stderr.matches("No space left").count(),
        1,
        "said once: {stderr}"
    );
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    assert!(ro, "remounting read-only");
    assert_eq!(ro_code, 1, "{ro_stderr}");
    assert!(ro_stderr.contains("Read-only file system"), "{ro_stderr}");
}
