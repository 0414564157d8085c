#!/usr/bin/env python3
"""Summarises ferrofit `train --json` lines and peer lines into a Markdown table
(median of the repeated runs, min..max, loss reached)."""
import json
import statistics
import sys
from collections import defaultdict

rows = defaultdict(list)
for path in sys.argv[1:]:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    for line in lines:
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "failed" in r or "skipped" in r:
            rows[(r.get("failed") or f"{r.get('peer')} {r.get('variant', '')}", "failed/skipped")].append(None)
            continue
        if "peer" in r:
            key = (f"{r['peer']} {r['variant']}", r["device"])
            rows[key].append((r["median_s"], r["final_loss"], r["min_s"], r["max_s"]))
        else:
            key = (f"ferrofit {r['engine']}", r["backend"])
            rows[key].append((r["train_seconds"], r["final_loss"], None, None))

print("| run | device | median s / 100 steps | min … max | final loss | runs |")
print("|---|---|---|---|---|---|")
for (name, dev), vals in rows.items():
    vals = [v for v in vals if v]
    if not vals:
        print(f"| {name} | {dev} | — | — | — | 0 |")
        continue
    t = [v[0] for v in vals]
    lo = min(v[2] if v[2] is not None else v[0] for v in vals)
    hi = max(v[3] if v[3] is not None else v[0] for v in vals)
    print(f"| {name} | {dev} | {statistics.median(t):.4f} | {lo:.4f} … {hi:.4f} | {statistics.median(v[1] for v in vals):.5f} | {len(vals)} |")
