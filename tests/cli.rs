//! The binary: the seed job reaches the report's loss, and nonsense arguments
//! get a one-line error naming the fix and exit code 2, never a panic.

mod common;

use common::ferrofit;

#[test]
fn seed_job_on_cpu_reaches_the_target_loss_and_saves() {
    let dir = std::env::temp_dir().join(format!("ferrofit-cli-{}", std::process::id()));
    let (code, stdout, stderr) = ferrofit(&[
        "train",
        "--backend",
        "cpu",
        "--json",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    for key in [
        "backend",
        "device",
        "engine",
        "precision",
        "steps",
        "final_loss",
        "train_seconds",
        "steps_per_second",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    assert_eq!(v["steps"], 100);
    let loss = v["final_loss"].as_f64().unwrap();
    assert!(loss < 0.03, "seed job final loss {loss}");
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(record["final_loss"], v["final_loss"]);
    assert!(record["loss_curve"].as_array().unwrap().len() >= 20);
    let saved = ferrofit::save::load(&dir.join("model.safetensors")).unwrap();
    assert_eq!(saved.layers.len(), 2);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn nonsense_arguments_name_the_fix() {
    let cases: &[(&[&str], &str)] = &[
        (&["train", "--lr", "0"], "--lr"),
        (&["train", "--lr=-1"], "--lr"),
        (&["train", "--hidden", "0"], "--hidden"),
        (&["train", "--n", "0"], "--n"),
        (&["train", "--steps", "0"], "--steps"),
        (&["train", "--task", "cubic"], "x2-noise"),
        (&["train", "--backend", "tpu"], "possible values"),
        (
            &["train", "--backend", "cpu", "--device", "7"],
            "out of range",
        ),
        (
            &[
                "train",
                "--backend",
                "cpu",
                "--engine",
                "fused",
                "--hidden",
                "500",
            ],
            "--engine general",
        ),
        (&["train", "--batch-size", "0"], "--batch-size"),
        (&["train", "--accumulate", "0"], "--accumulate"),
        // Too many points for the kernels' 32-bit counts, or for any memory.
        (&["train", "--n", "100000000000"], "--n"),
        // Models whose weights no allocation holds (an abort before).
        (&["train", "--hidden", "3000000000"], "--hidden"),
        (&["train", "--hidden", "60000", "--layers", "3"], "--hidden"),
        (&["train", "--layers", "100000000"], "--layers"),
        // Checkpoints need a folder to go into (the check was lost once).
        (&["train", "--checkpoint-every", "5"], "--out DIR"),
        // A count that is not whole.
        (&["train", "--n", "1.5e0"], "not a count"),
        (&["bench", "--cooldown", "1e300"], "--cooldown"),
        (&["bench", "--cooldown", "inf"], "--cooldown"),
        (&["bench", "--cooldown=-1"], "--cooldown"),
        // bench's outputs are --export-*: the old output names are refused.
        (&["bench", "--csv", "data.csv"], "--export-csv"),
        (&["bench", "--json", "b.json"], "--export-json"),
    ];
    for (args, needle) in cases {
        let (code, _, stderr) = ferrofit(args);
        assert_eq!(code, 2, "{args:?} exited {code}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
    }
}

#[test]
fn devices_lists_the_cpu_as_json() {
    let (code, stdout, _) = ferrofit(&["devices", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(v["devices"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["api"] == "cpu"));
}

#[test]
fn doctor_passes_on_the_cpu_and_fails_on_a_diverging_learning_rate() {
    let (code, stdout, stderr) =
        ferrofit(&["doctor", "--backend", "cpu", "--max-n", "1e6", "--json"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let findings = v["devices"][0]["findings"].as_array().unwrap();
    for check in [
        "parameters update",
        "gradients",
        "loss falls (default lr)",
        "largest N",
        "jitter",
        "f16 / bf16",
    ] {
        let f = findings
            .iter()
            .find(|f| f["check"] == check)
            .unwrap_or_else(|| panic!("no {check} in {stdout}"));
        assert_ne!(f["severity"], "fail", "{f}");
    }
    let features = v["devices"][0]["device"]["features"].as_array().unwrap();
    assert!(features.iter().any(|f| f == "f32"), "{features:?}");
    let (code, stdout, _) = ferrofit(&[
        "doctor",
        "--backend",
        "cpu",
        "--lr",
        "5",
        "--max-n",
        "65536",
        "--json",
    ]);
    assert_eq!(code, 1, "a failed check exits 1");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let f = v["devices"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == "loss falls (your --lr)")
        .cloned()
        .unwrap();
    assert_eq!(f["severity"], "fail");
    assert!(f["fix"].as_str().unwrap().contains("lower --lr"), "{f}");
}

/// `tune` on every test device: the winner reaches the job's own loss no
/// slower than the job as given, is cached, and `train --tuned` runs it.
#[test]
fn tune_beats_or_matches_the_job_and_train_uses_the_winner() {
    let dir = std::env::temp_dir().join(format!("ferrofit-tune-cli-{}", std::process::id()));
    let cache = dir.join("tuned.json");
    let mut backends = vec!["cpu"];
    if std::env::var("FERROFIT_REQUIRE_WGPU").is_ok_and(|v| v == "1") {
        backends.push("wgpu");
    }
    for backend in backends {
        let job = ["--backend", backend, "--n", "8192", "--steps", "40"];
        let mut args = vec![
            "tune",
            "--budget",
            "4s",
            "--json",
            "--cache",
            cache.to_str().unwrap(),
        ];
        args.extend(job);
        let (code, stdout, stderr) = ferrofit(&args);
        assert_eq!(code, 0, "{stderr}");
        let v: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON object");
        let winner = &v["winner"];
        let base = &v["report"]["baseline"];
        assert_eq!(base["reached"], true, "{stdout}");
        // (The winner is never slower than the baseline by construction: what
        // can fail is that it reached the target, and that `--tuned` reuses it.)
        assert_eq!(winner["reached"], true, "{stdout}");
        let target = v["report"]["target_loss"].as_f64().unwrap();
        let mut args = vec![
            "train",
            "--tuned",
            "--json",
            "--tune-cache",
            cache.to_str().unwrap(),
        ];
        args.extend(job);
        let (code, stdout, stderr) = ferrofit(&args);
        assert_eq!(code, 0, "{stderr}");
        let run: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(
            run["config"]["batch_size"], winner["candidate"]["batch_size"],
            "{stdout}"
        );
        assert_eq!(run["config"]["lr"], winner["candidate"]["lr"], "{stdout}");
        assert!(
            run["final_loss"].as_f64().unwrap() <= target * 1.05,
            "{stdout}"
        );
    }
    let (code, _, stderr) = ferrofit(&[
        "train",
        "--tuned",
        "--n",
        "777",
        "--tune-cache",
        cache.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("run `ferrofit tune`"), "{stderr}");
}
