#!/usr/bin/env bash
# Session 3, fourth H200 call: the probe now runs on a scratch engine. The
# persistent test on every backend, the grid each backend picks, the seed job.
set -u
. benches/device/setup.sh
B=/tmp/ferrofit
summary='import json,sys; r=json.load(sys.stdin); print("%.3f ms, loss %.6f, %s" % (r["train_seconds"]*1e3, r["final_loss"], r.get("engine_note")))'
for b in cuda vulkan; do
  printf "%s: " $b
  $B train --backend $b --log-every 100 --json 2>>"$OUT/stderr.txt" | python3 -c "$summary"
done | tee "$OUT/grid.txt"
gunzip -c .dev/test_persistent.gz > /tmp/test_persistent && chmod +x /tmp/test_persistent
FERROFIT_REQUIRE_WGPU=1 FERROFIT_REQUIRE_CUDA=1 timeout 150 /tmp/test_persistent --test-threads 1 --nocapture > "$OUT/test_persistent.txt" 2>&1
grep -E "^test |test result|panicked" "$OUT/test_persistent.txt" | sort | uniq -c
