"""ferrofit: train small MLPs fast on any GPU (Vulkan/DX12/Metal/CUDA) or the CPU.

    import numpy as np, ferrofit
    x = np.linspace(-1, 1, 10_000)
    model = ferrofit.fit(x, x**2, hidden=32, layers=2, optimizer="adam", steps=500)
    model.predict([[0.5]])          # raw units in, raw units out
    model.save("runs/square"); ferrofit.load("runs/square")

Inputs and targets are standardised with the training rows' statistics, which
are saved with the model (as ``ferrofit train --csv`` does). Training runs in
Rust with the GIL released; Ctrl-C stops it at the next log point.
"""

from __future__ import annotations

import json
import sys

import numpy as np

from . import _native

__version__ = _native.__version__
__all__ = ["fit", "load", "devices", "bench", "Model", "__version__"]


def _matrix(name, a, width=None):
    """`a` as a C-ordered float32 matrix, or a clear error."""
    arr = np.asarray(a)
    if arr.dtype not in (np.float32, np.float64):
        raise TypeError(
            f"{name} has dtype {arr.dtype}: give float32 or float64 values "
            f"(e.g. {name}.astype(np.float32))"
        )
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1) if width in (None, 1) else arr.reshape(1, -1)
    if arr.ndim != 2:
        raise ValueError(f"{name} has shape {arr.shape}: give a 1-D array or a 2-D array of rows")
    if width is not None and arr.shape[1] != width:
        raise ValueError(f"{name} has {arr.shape[1]} columns; the model takes {width}")
    if not np.isfinite(arr).all():
        row = int(np.argwhere(~np.isfinite(arr))[0][0])
        raise ValueError(f"{name} row {row} is not finite: drop or fill such rows first")
    return np.ascontiguousarray(arr, dtype=np.float32)


class _Bar:
    """A progress bar: tqdm's (notebook-aware) when installed, else one line
    rewritten on a terminal, else nothing."""

    def __init__(self, steps, show):
        self.bar = None
        self.tty = False
        if not show:
            return
        try:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=steps, unit="step", leave=False)
        except ImportError:
            self.tty = sys.stderr.isatty()
        self.done = 0

    def __call__(self, step, steps, loss):
        if self.bar is not None:
            self.bar.update(step - self.done)
            self.bar.set_postfix(loss=f"{loss:.5g}")
        elif self.tty:
            sys.stderr.write(f"\rstep {step}/{steps}  loss {loss:.6g}   ")
            sys.stderr.flush()
        self.done = step

    def close(self):
        if self.bar is not None:
            self.bar.close()
        elif self.tty:
            sys.stderr.write("\n")


class Model:
    """A trained model: predicts in the units it was trained in."""

    def __init__(self, native):
        self._m = native

    @property
    def inputs(self) -> int:
        return self._m.inputs

    @property
    def outputs(self) -> int:
        return self._m.outputs

    @property
    def activation(self) -> str:
        return self._m.activation

    @property
    def normalization(self) -> dict:
        """Input and target names, means and standard deviations."""
        return json.loads(self._m.normalization_json())

    @property
    def record(self):
        """How it was trained (as ``ferrofit train --json`` prints it), or None."""
        r = self._m.record_json()
        return None if r is None else json.loads(r)

    def predict(self, X) -> np.ndarray:
        """Predictions for the rows of X: shape (rows,) for one output, else (rows, outputs)."""
        x = _matrix("X", X, self.inputs)
        y = np.frombuffer(self._m.predict(x.tobytes()), dtype=np.float32)
        y = y.reshape(-1, self.outputs)
        return y[:, 0].copy() if self.outputs == 1 else y.copy()

    def save(self, path) -> None:
        """Writes model.safetensors (and run.json) into the new or empty folder `path`."""
        self._m.save(str(path))

    def state_dict(self) -> dict:
        """The weights as numpy arrays under PyTorch's names (``layers.0.weight``: [out, in])."""
        return {
            name: np.frombuffer(data, dtype=np.float32).reshape(shape).copy()
            for name, shape, data in self._m.tensors()
        }

    def to_torch(self):
        """A ``torch.nn.Module`` that computes the same predictions (raw units
        in and out: the standardisation is part of the module)."""
        import torch

        acts = {
            "relu": torch.nn.ReLU,
            "tanh": torch.nn.Tanh,
            "sigmoid": torch.nn.Sigmoid,
            "silu": torch.nn.SiLU,
            "gelu": torch.nn.GELU,
        }
        state = self.state_dict()
        count = len(state) // 2
        layers = []
        for i in range(count):
            w = torch.from_numpy(state[f"layers.{i}.weight"])
            lin = torch.nn.Linear(w.shape[1], w.shape[0])
            with torch.no_grad():
                lin.weight.copy_(w)
                lin.bias.copy_(torch.from_numpy(state[f"layers.{i}.bias"]))
            layers.append(lin)
            if i + 1 < count:
                layers.append(acts[self.activation]())
        norm = self.normalization
        return _Standardised(torch.nn.Sequential(*layers), norm)

    def __repr__(self):
        return f"ferrofit.Model(inputs={self.inputs}, outputs={self.outputs}, activation={self.activation!r})"


def _Standardised(net, norm):
    import torch

    class Standardised(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = net
            f = lambda k: torch.tensor(norm[k], dtype=torch.float32)
            self.register_buffer("x_mean", f("x_mean"))
            self.register_buffer("x_std", f("x_std"))
            self.register_buffer("y_mean", f("y_mean"))
            self.register_buffer("y_std", f("y_std"))

        def forward(self, x):
            return self.net((x - self.x_mean) / self.x_std) * self.y_std + self.y_mean

    return Standardised()


def fit(
    X,
    y,
    *,
    hidden: int = 10,
    layers: int = 1,
    activation: str = "relu",
    loss: str = "mse",
    optimizer: str = "sgd",
    lr: float | None = None,
    weight_decay: float = 0.0,
    schedule: str = "constant",
    steps: int = 100,
    batch_size: int | None = None,
    precision: str = "f32",
    seed: int = 42,
    val_split: float = 0.0,
    patience: int | None = None,
    backend: str = "auto",
    device: int | None = None,
    engine: str = "auto",
    progress: bool = True,
) -> Model:
    """Fits an MLP of `layers` hidden layers of `hidden` units to (X, y).

    X: (rows,) or (rows, inputs); y: (rows,) or (rows, outputs); float32 or
    float64, C or Fortran order. `backend`: auto (CUDA, then a discrete GPU,
    then an integrated GPU, then the CPU), cpu, vulkan, metal, dx12, wgpu,
    cuda. `val_split` holds rows out for the validation loss, which
    `patience` watches (early stopping). Other knobs as ``ferrofit train --help``.
    """
    x = _matrix("X", X)
    t = _matrix("y", y)
    if x.shape[0] != t.shape[0]:
        raise ValueError(f"X has {x.shape[0]} rows and y {t.shape[0]}: give one target row per input row")
    bar = _Bar(steps, progress)
    try:
        native = _native.fit(
            x.tobytes(), t.tobytes(), x.shape[1], t.shape[1], hidden, layers, activation,
            loss, optimizer, lr, weight_decay, schedule, steps, batch_size, precision, seed,
            val_split, patience, backend, device, engine, bar if progress else None,
        )
    finally:
        bar.close()
    return Model(native)


def load(path) -> Model:
    """Reads a model saved by ``Model.save`` or ``ferrofit train --out``."""
    return Model(_native.load(str(path)))


def devices() -> list:
    """Every device this build can use (as ``ferrofit devices --json``)."""
    return json.loads(_native.devices())["devices"]


def bench(backends=(), *, n=1_000_000, hidden=10, layers=1, steps=100, runs=5, warmup=1) -> list:
    """Times the seed job (or the model given) on each backend; one dict a device,
    with the timed runs' ``samples`` (seconds) and their ``summary``."""
    return json.loads(_native.bench(list(backends), n, hidden, layers, steps, runs, warmup))
