//! `ferrofit report`: a page built from real train, bench and doctor records
//! loads in headless Chromium with no console errors and carries every chart
//! (a screenshot is kept under the target folder for a person to look at), and
//! hostile strings from a record come out as text.

mod common;

use common::ferrofit;
use std::path::Path;
use std::process::Command;

/// Headless Chromium, or None (a failure when FERROFIT_REQUIRE_CHROMIUM=1).
fn chromium() -> Option<&'static str> {
    let found = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    if found.is_none() && std::env::var("FERROFIT_REQUIRE_CHROMIUM").is_ok_and(|v| v == "1") {
        panic!("FERROFIT_REQUIRE_CHROMIUM=1 but no chromium: apt-get install -y chromium");
    }
    found
}

fn headless(bin: &str, profile: &Path, extra: &[&str], page: &Path) -> (String, String) {
    let out = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn the_page_renders_in_chromium_with_every_chart() {
    let dir = common::fresh_dir("report-e2e");
    let run = dir.join("run");
    let (code, _, e) = common::train_cpu("20000", "60", &["--out", run.to_str().unwrap()]);
    assert_eq!(code, 0, "{e}");
    let bench = dir.join("bench.json");
    let (code, _, e) = ferrofit(&[
        "bench",
        "--backends",
        "cpu",
        "--n",
        "20000",
        "--steps",
        "20",
        "--reps",
        "2",
        "--no-history",
        "--export-json",
        bench.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{e}");
    let (code, doctor, e) = ferrofit(&["doctor", "--backend", "cpu", "--max-n", "65536", "--json"]);
    assert_eq!(code, 0, "{e}");
    let doc = dir.join("doctor.json");
    std::fs::write(&doc, doctor).unwrap();
    let page = dir.join("report.html");
    let (code, _, e) = ferrofit(&[
        "report",
        run.join("run.json").to_str().unwrap(),
        bench.to_str().unwrap(),
        doc.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{e}");
    let html = std::fs::read_to_string(&page).unwrap();
    for id in [
        "loss-0", "fit-0", "bars-1", "curves-1", "hist-1-0", "doctor", "machine",
    ] {
        assert!(
            html.contains(&format!("id=\"{id}\"")),
            "no #{id} in the page"
        );
    }
    // No external assets: the only URL is the SVG namespace.
    let without_ns = html.replace("http://www.w3.org/2000/svg", "");
    assert!(
        !without_ns.contains("http://") && !without_ns.contains("https://"),
        "the page refers to something outside itself"
    );
    let Some(bin) = chromium() else {
        eprintln!("skipping the browser part: no chromium");
        return;
    };
    let (dom, log) = headless(bin, &dir.join("profile"), &["--dump-dom"], &page);
    assert!(
        dom.contains("<h1>ferrofit report</h1>"),
        "the page did not load: {log}"
    );
    for id in ["loss-0", "fit-0", "bars-1", "curves-1", "hist-1-0"] {
        assert!(
            dom.contains(&format!("id=\"{id}\"")),
            "#{id} missing after loading"
        );
    }
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .collect();
    assert!(errors.is_empty(), "console errors: {errors:?}");
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-screenshot.png");
    let _ = std::fs::remove_file(&shot);
    headless(
        bin,
        &dir.join("profile2"),
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1100,2600",
        ],
        &page,
    );
    eprintln!("screenshot: {}", shot.display());
    // What the screenshot shows: the charts' lines and bars in the palette's
    // blue (#3182ce) and orange (#dd6b20), and text, not an empty page.
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let near = |p: &[u8], c: [u8; 3]| (0..3).all(|k| p[k].abs_diff(c[k]) < 24);
    let (mut blue, mut orange, mut ink) = (0usize, 0usize, 0usize);
    for p in buf[..info.buffer_size()].chunks_exact(px) {
        blue += near(p, [0x31, 0x82, 0xce]) as usize;
        orange += near(p, [0xdd, 0x6b, 0x20]) as usize;
        ink += (p[0] < 96 && p[1] < 96 && p[2] < 96) as usize;
    }
    let total = (info.width * info.height) as usize;
    assert!(
        blue > 2_000,
        "{blue} blue pixels: the series and bars are not drawn"
    );
    assert!(
        orange > 300,
        "{orange} orange pixels: the fitted curve is not drawn"
    );
    assert!(
        ink > total / 500,
        "{ink} dark pixels of {total}: no text on the page"
    );
}

/// A 5-step CPU run into `dir/run`: its run.json's path and contents.
fn small_run(dir: &Path) -> (std::path::PathBuf, serde_json::Value) {
    let run = dir.join("run");
    let (code, _, e) = common::train_cpu("2000", "5", &["--out", run.to_str().unwrap()]);
    assert_eq!(code, 0, "{e}");
    let path = run.join("run.json");
    let v = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    (path, v)
}

#[test]
fn hostile_strings_in_a_record_come_out_as_text() {
    let dir = common::fresh_dir("report-hostile");
    let (_, mut v) = small_run(&dir);
    v["device"]["name"] = "<script>alert('x')</script>".into();
    v["engine_note"] = "<img src=x onerror=alert(1)>".into();
    let evil = dir.join("evil.json");
    std::fs::write(&evil, v.to_string()).unwrap();
    let page = dir.join("evil.html");
    let (code, _, e) = ferrofit(&[
        "report",
        evil.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{e}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        !html.contains("<script") && !html.contains("<img"),
        "unescaped markup"
    );
    assert!(html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
    if let Some(bin) = chromium() {
        let (dom, _) = headless(bin, &dir.join("profile"), &["--dump-dom"], &page);
        assert!(
            dom.contains("&lt;script&gt;") && !dom.contains("<script>alert"),
            "the browser saw markup"
        );
    }
    let (code, _, e) = ferrofit(&["report", dir.join("nope.json").to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(e.contains("nope.json"), "{e}");
    std::fs::write(dir.join("other.json"), "{\"a\": 1}").unwrap();
    let (code, _, e) = ferrofit(&[
        "report",
        dir.join("other.json").to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(e.contains("not a ferrofit record"), "{e}");
}

#[test]
fn an_edited_run_record_is_refused_with_the_field_named() {
    let dir = common::fresh_dir("report-edited");
    let (path, mut v) = small_run(&dir);
    v["final_loss"] = serde_json::Value::String("low".into());
    std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
    let out = dir.join("report.html");
    let (code, _, e) = ferrofit(&[
        "report",
        path.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_ne!(code, 0, "an edited record must be refused");
    assert!(
        e.contains("run.json") && e.contains("final_loss"),
        "the error names the file and the field: {e}"
    );
    assert!(!out.exists(), "no page is written from a bad record");
}
