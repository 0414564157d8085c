#!/usr/bin/env python3
"""The field report's seed job in PyTorch and JAX, for side-by-side timing with ferrofit.

y = x^2 + 0.3*U(0,1) on N points in [-1, 1], Linear(1,H)-ReLU-Linear(H,1), MSE,
full batch, SGD lr 0.2, STEPS steps, data created on the device. With
--layers L, L hidden layers of H units (ReLU after each). With --precision
bf16 or f16, each peer's usual mixed precision: PyTorch autocast, JAX
half-precision operands over f32 master weights; the loss in f32.

Each variant is warmed up (compilation and autotune off the clock), synchronised
before reading the clock, and repeated REPS times; one JSON line per variant:
{"peer", "variant", "device", "n", "hidden", "steps", "median_s", "min_s", "max_s", "final_loss"}.

Usage: seed_job.py [--n 1000000] [--hidden 10] [--layers 1] [--steps 100] [--reps 5]
                   [--precision f32|bf16|f16] [--only torch-eager,torch-graph,torch-compile,jax-jit,jax-jit-exact] [--cpu]
"""
import argparse
import contextlib
import json
import statistics
import sys
import time


def emit(peer, variant, device, a, times, loss):
    if a.precision != "f32":
        variant = f"{variant}-{a.precision}"
    print(json.dumps({
        "peer": peer, "variant": variant, "device": device, "n": a.n, "hidden": a.hidden, "layers": a.layers,
        "steps": a.steps, "median_s": statistics.median(times), "min_s": min(times), "times": times,
        "max_s": max(times), "final_loss": float(loss), "reps": len(times),
    }), flush=True)


def torch_variants(a, only):
    try:
        import torch
    except ImportError as e:
        print(json.dumps({"peer": "torch", "skipped": str(e)}), flush=True)
        return
    dev = "cuda" if torch.cuda.is_available() and not a.cpu else "cpu"
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    torch.manual_seed(0)
    x = torch.linspace(-1, 1, a.n, device=dev).unsqueeze(1)
    y = x.pow(2) + 0.3 * torch.rand(x.size(), device=dev)

    def make():
        mods = [torch.nn.Linear(1, a.hidden), torch.nn.ReLU()]
        for _ in range(a.layers - 1):
            mods += [torch.nn.Linear(a.hidden, a.hidden), torch.nn.ReLU()]
        net = torch.nn.Sequential(*mods, torch.nn.Linear(a.hidden, 1)).to(dev)
        opt = torch.optim.SGD(net.parameters(), lr=0.2)
        return net, opt

    half = {"bf16": torch.bfloat16, "f16": torch.float16}.get(a.precision)

    def forward(net):
        if half is None:
            return net(x)
        with torch.autocast(device_type=dev, dtype=half):
            return net(x).float()

    def step_fn(net, opt):
        opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.mse_loss(forward(net), y)
        loss.backward()
        opt.step()
        return loss

    if "torch-eager" in only:
        times = []
        for r in range(a.reps + 1):
            net, opt = make()
            sync(); t = time.perf_counter()
            for _ in range(a.steps):
                loss = step_fn(net, opt)
            sync(); dt = time.perf_counter() - t
            if r > 0:
                times.append(dt)
        emit("torch", "eager", dev, a, times, loss.item())

    if "torch-compile" in only:
        try:
            net, opt = make()
            init_state = {k: v.clone() for k, v in net.state_dict().items()}
            cstep = torch.compile(step_fn)
            times = []
            for r in range(a.reps + 1):
                with torch.no_grad():
                    for k, v in net.state_dict().items():
                        v.copy_(init_state[k])
                if r == 0:
                    for _ in range(3):
                        cstep(net, opt)  # compile off the clock
                    continue
                sync(); t = time.perf_counter()
                for _ in range(a.steps):
                    loss = cstep(net, opt)
                sync(); times.append(time.perf_counter() - t)
            emit("torch", "compile", dev, a, times, loss.item())
        except Exception as e:  # noqa: BLE001
            print(json.dumps({"peer": "torch", "variant": "compile", "skipped": repr(e)[:300]}), flush=True)

    if "torch-graph" in only and dev == "cuda":
        times = []
        for r in range(a.reps + 1):
            net, opt = make()
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    step_fn(net, opt)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            opt.zero_grad(set_to_none=False)
            with torch.cuda.graph(g):
                static_loss = step_fn(net, opt)
            sync(); t = time.perf_counter()
            for _ in range(a.steps):
                g.replay()
            sync(); dt = time.perf_counter() - t
            if r > 0:
                times.append(dt)
        emit("torch", "cuda-graph", dev, a, times, static_loss.item())


def jax_variant(a, exact=False):
    """JAX jit; `exact` runs its matmuls at "highest" precision (no TF32 on
    tensor cores), the exact-f32 products ferrofit's f32 engine computes."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as e:
        print(json.dumps({"peer": "jax", "skipped": str(e)}), flush=True)
        return
    if a.cpu:
        jax.config.update("jax_platforms", "cpu")
    dev = jax.devices()[0].platform
    key = jax.random.PRNGKey(0)
    x = jnp.linspace(-1, 1, a.n).reshape(-1, 1)
    y = x ** 2 + 0.3 * jax.random.uniform(key, x.shape)

    widths = [1] + [a.hidden] * a.layers + [1]

    def init(k):
        # PyTorch's Linear init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases.
        params = []
        for fan_in, fan_out in zip(widths, widths[1:]):
            k, kw, kb = jax.random.split(k, 3)
            bound = 1.0 / fan_in ** 0.5
            params.append((jax.random.uniform(kw, (fan_in, fan_out), minval=-bound, maxval=bound),
                           jax.random.uniform(kb, (fan_out,), minval=-bound, maxval=bound)))
        return params

    dt = {"bf16": jnp.bfloat16, "f16": jnp.float16}.get(a.precision, jnp.float32)

    def loss_fn(p):
        h = x.astype(dt)
        for w, b in p[:-1]:
            h = jax.nn.relu(h @ w.astype(dt) + b.astype(dt))
        w, b = p[-1]
        out = (h @ w.astype(dt) + b.astype(dt)).astype(jnp.float32)
        return jnp.mean((out - y) ** 2)

    @jax.jit
    def step(p):
        loss, g = jax.value_and_grad(loss_fn)(p)
        return jax.tree_util.tree_map(lambda w, d: w - 0.2 * d, p, g), loss

    # The precision is part of jit's cache key: every call runs under it.
    precision = jax.default_matmul_precision("highest") if exact else contextlib.nullcontext()
    with precision:
        times = []
        for r in range(a.reps + 1):
            p = init(jax.random.PRNGKey(r))
            p, loss = step(p)  # compile off the clock
            jax.block_until_ready(p)
            p = init(jax.random.PRNGKey(r))
            t = time.perf_counter()
            for _ in range(a.steps):
                p, loss = step(p)
            jax.block_until_ready(p)
            dt = time.perf_counter() - t
            if r > 0:
                times.append(dt)
    emit("jax", "jit-exact" if exact else "jit", dev, a, times, loss)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--hidden", type=int, default=10)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--precision", choices=["f32", "bf16", "f16"], default="f32")
    ap.add_argument("--only", default="torch-eager,torch-graph,torch-compile,jax-jit,jax-jit-exact")
    ap.add_argument("--cpu", action="store_true", help="force the CPU")
    a = ap.parse_args()
    only = set(a.only.split(","))
    if only & {"torch-eager", "torch-graph", "torch-compile"}:
        torch_variants(a, only)
    if "jax-jit" in only:
        jax_variant(a)
    if "jax-jit-exact" in only:
        jax_variant(a, exact=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
