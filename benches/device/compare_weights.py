#!/usr/bin/env python3
"""Compares `ferrofit train --out` folders against the first: largest weight
difference and largest relative loss-curve difference (plain Python, no deps)."""
import json
import struct
import sys


def load(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        raw = b[8 + n + s:8 + n + e]
        out[k] = struct.unpack(f"<{len(raw) // 4}f", raw)
    return out


ref_dir, *others = sys.argv[1:]
ref = load(f"{ref_dir}/model.safetensors")
ref_curve = [p["loss"] for p in json.load(open(f"{ref_dir}/run.json"))["loss_curve"]]
for d in others:
    try:
        m = load(f"{d}/model.safetensors")
        dw = max(abs(x - y) for k in ref for x, y in zip(ref[k], m[k]))
        curve = [p["loss"] for p in json.load(open(f"{d}/run.json"))["loss_curve"]]
        dl = max(abs(x - y) / y for x, y in zip(curve, ref_curve))
        print(f"{d}: max |w - w_ref| = {dw:.3e}; max relative loss-curve difference = {dl:.3e}")
    except Exception as e:  # noqa: BLE001
        print(f"{d}: {e!r}")
