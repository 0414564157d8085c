"""The Python package on the CPU (and lavapipe where it is), built by maturin
from the same compiled crates as the Rust tests (`.ci/test.sh`)."""

import csv
import io
import os
import subprocess
import threading
import time

import numpy as np
import pytest

import ferrofit


def square(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, n)
    return x, x**2 * 3 + 10  # raw units far from standardised ones


def test_fit_predict_in_raw_units():
    x, y = square()
    m = ferrofit.fit(x, y, hidden=32, layers=2, optimizer="adam", lr=0.01, steps=400,
                     backend="cpu", progress=False)
    assert (m.inputs, m.outputs, m.activation) == (1, 1, "relu")
    got = m.predict(np.array([[-0.5], [0.0], [0.8]]))
    assert got.shape == (3,)
    np.testing.assert_allclose(got, [10.75, 10.0, 11.92], atol=0.15)
    rec = m.record
    assert rec["config"]["task"] == "arrays" and rec["steps"] == 400
    assert m.normalization["y_mean"][0] == pytest.approx(y.mean(), rel=1e-3)


def test_arrays_of_any_layout_and_clear_errors():
    rng = np.random.default_rng(1)
    X = np.asfortranarray(rng.uniform(-1, 1, (500, 3)))  # float64, Fortran order
    y = X @ np.array([1.0, -2.0, 0.5])
    m = ferrofit.fit(X, y, hidden=16, optimizer="adam", lr=0.02, steps=300, backend="cpu", progress=False)
    assert np.abs(m.predict(X[:50]) - y[:50]).max() < 0.3
    assert m.predict(X[:5].astype(np.float32)).dtype == np.float32
    with pytest.raises(TypeError, match="dtype int64"):
        ferrofit.fit(np.arange(10), np.arange(10.0), progress=False)
    with pytest.raises(ValueError, match="one target row per input row"):
        ferrofit.fit(np.zeros(10), np.zeros(9), progress=False)
    with pytest.raises(ValueError, match="not finite"):
        ferrofit.fit(np.array([0.0, np.nan]), np.zeros(2), progress=False)
    with pytest.raises(ValueError, match="the model takes 3"):
        m.predict(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="activation"):
        ferrofit.fit(np.zeros(4), np.zeros(4), activation="swish", progress=False)
    with pytest.raises(ValueError, match="invalid hidden 0"):
        ferrofit.fit(np.zeros(4), np.zeros(4), hidden=0, backend="cpu", progress=False)


def test_save_load_and_the_file_in_numpy(tmp_path):
    """A saved model, read with the safetensors package, reproduces predict in
    numpy: PyTorch's layout, the activation and the standardisation."""
    from safetensors.numpy import load_file

    x, y = square(2000)
    m = ferrofit.fit(x, y, hidden=16, layers=2, activation="tanh", optimizer="adam",
                     lr=0.01, steps=200, backend="cpu", progress=False)
    m.save(tmp_path / "run")
    again = ferrofit.load(tmp_path / "run")
    probe = np.linspace(-1, 1, 7).reshape(-1, 1)
    np.testing.assert_array_equal(again.predict(probe), m.predict(probe))
    t = load_file(str(tmp_path / "run" / "model.safetensors"))
    assert set(t) == set(m.state_dict())
    n = m.normalization
    h = (probe - n["x_mean"]) / n["x_std"]
    for i in range(3):
        h = h @ t[f"layers.{i}.weight"].T + t[f"layers.{i}.bias"]
        if i < 2:
            h = np.tanh(h)
    ours = h[:, 0] * n["y_std"][0] + n["y_mean"][0]
    np.testing.assert_allclose(ours, m.predict(probe), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="already holds a finished run"):
        m.save(tmp_path / "run")


def test_validation_and_early_stopping():
    # Noisy targets: the validation loss settles at the noise and stops improving.
    x, y = square(3000)
    y = y + np.random.default_rng(2).normal(0, 1.0, y.shape)
    m = ferrofit.fit(x, y, hidden=32, optimizer="adam", lr=0.05, steps=2000, val_split=0.2,
                     patience=3, backend="cpu", progress=False)
    rec = m.record
    assert rec["steps"] < 2000, "stopped early"
    assert all("val_loss" in p for p in rec["loss_curve"])
    with pytest.raises(ValueError, match="val_split"):
        ferrofit.fit(x, y, patience=3, backend="cpu", progress=False)


def test_training_releases_the_gil_and_reports_progress():
    x, y = square(200_000)
    seen, ticks = [], []
    done = threading.Event()

    def work():
        seen.append(ferrofit.fit(x, y, hidden=64, layers=3, steps=300, backend="cpu", progress=False))
        done.set()

    t = threading.Thread(target=work)
    t.start()
    while not done.is_set():
        ticks.append(1)
        time.sleep(0.001)
    t.join()
    assert len(ticks) > 20, "the main thread ran while training"
    calls = []
    ferrofit._native.fit(
        x.astype(np.float32).tobytes(), y.astype(np.float32).tobytes(), 1, 1, 10, 1, "relu", "mse",
        "sgd", None, 0.0, "constant", 40, None, "f32", 42, 0.0, None, "cpu", None, "auto",
        lambda step, steps, loss: calls.append((step, steps)),
    )
    assert calls[-1] == (40, 40) and len(calls) == 20


def test_ctrl_c_stops_training_with_keyboard_interrupt():
    """Ctrl-C during training raises KeyboardInterrupt within seconds. The
    interrupt (SIGINT, as `_thread.interrupt_main` simulates it) repeats
    every 0.3 s until fit returns, as a user presses Ctrl-C again: once in
    CI a single interrupt was never seen and the test hung (the cause was not
    found; 60 runs under load did not repeat it). The handler raises only
    while fit runs, so a late interrupt cannot reach the next test."""
    import _thread
    import signal

    x, y = square(200_000)
    armed, stop = True, threading.Event()

    def handler(signum, frame):
        if armed:
            signal.default_int_handler(signum, frame)

    def interrupter():
        while not stop.wait(0.3):
            _thread.interrupt_main()

    def fit():
        nonlocal armed
        try:
            ferrofit.fit(x, y, hidden=64, layers=3, steps=100_000, backend="cpu", progress=False)
        finally:
            armed = False  # a plain store: no pending handler runs before it

    old = signal.signal(signal.SIGINT, handler)
    t = threading.Thread(target=interrupter)
    start = time.time()
    t.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            fit()
        assert time.time() - start < 30
    finally:
        armed = False
        stop.set()
        t.join()
        # signal.signal runs the (disarmed) handler of a pending SIGINT first.
        signal.signal(signal.SIGINT, old)


def test_devices_and_bench():
    kinds = {d["api"] for d in ferrofit.devices()}
    assert "cpu" in kinds
    rows = ferrofit.bench(["cpu"], n=20_000, steps=20, runs=2)
    assert len(rows) == 1 and len(rows[0]["samples"]) == 2
    assert rows[0]["final_loss"] < 0.2


def test_lavapipe_when_present():
    if os.environ.get("FERROFIT_REQUIRE_WGPU") != "1" and not any(
        d["api"] == "vulkan" for d in ferrofit.devices()
    ):
        pytest.skip("no Vulkan device")
    x, y = square()
    m = ferrofit.fit(x, y, hidden=32, layers=2, optimizer="adam", lr=0.01, steps=300,
                     backend="vulkan", progress=False)
    assert m.record["backend"] == "vulkan"
    np.testing.assert_allclose(m.predict(np.array([0.0])), [10.0], atol=0.2)


def test_to_torch_matches_predict():
    torch = pytest.importorskip("torch")
    x, y = square(1000)
    m = ferrofit.fit(x, y, hidden=8, steps=50, backend="cpu", progress=False)
    probe = np.linspace(-1, 1, 5).reshape(-1, 1).astype(np.float32)
    got = m.to_torch()(torch.from_numpy(probe)).detach().numpy()[:, 0]
    np.testing.assert_allclose(got, m.predict(probe), rtol=1e-5, atol=1e-5)


POINTS = [0.1, 0.5, 0.9]


def cli_model(tmp_path):
    """A model trained and saved by `ferrofit train --out`, and what
    `ferrofit predict` says at POINTS."""
    exe = os.environ.get("FERROFIT_BIN")
    if not exe:
        pytest.skip("FERROFIT_BIN (the ferrofit binary) not set")
    run = tmp_path / "run"
    subprocess.run([exe, "-q", "train", "--backend", "cpu", "--n", "20000", "--steps", "200",
                    "--hidden", "16", "--out", str(run)], check=True)
    out = subprocess.run([exe, "-q", "predict", "--model", str(run), "--x", "0.1,0.5,0.9"],
                         check=True, capture_output=True, text=True).stdout
    rows = list(csv.reader(io.StringIO(out)))
    return run, np.array([float(r[-1]) for r in rows[1:]])


def test_a_model_saved_by_the_cli(tmp_path):
    run, theirs = cli_model(tmp_path)
    np.testing.assert_allclose(ferrofit.load(run).predict(np.array(POINTS)), theirs, rtol=1e-5, atol=1e-6)


def test_a_model_saved_by_the_cli_in_torch(tmp_path):
    torch = pytest.importorskip("torch")
    run, theirs = cli_model(tmp_path)
    module = ferrofit.load(run).to_torch()
    got = module(torch.tensor([[p] for p in POINTS])).detach().numpy()[:, 0]
    np.testing.assert_allclose(got, theirs, rtol=1e-5, atol=1e-5)
