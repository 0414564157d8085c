#!/usr/bin/env bash
# Session 3, second H200 call: after the persistent kernel got per-cube
# mailboxes, at least one cube per gradient column and weights in registers.
# The grid and loss beside two launches, the seed job beside JAX, the N sweep,
# H = 64, then the persistent and gradient tests on every backend.
set -u
. benches/device/setup.sh
B=/tmp/ferrofit
summary='import json,sys; r=json.load(sys.stdin); print("%.3f ms, loss %.6f, %s" % (r["train_seconds"]*1e3, r["final_loss"], r.get("engine_note")))'
echo "== grid (seed job, one train each)"
for b in cuda vulkan; do
  for p in "" --no-persistent; do
    printf "%s %s: " $b "${p:-persistent}"
    $B train --backend $b --log-every 100 $p --json 2>>"$OUT/stderr.txt" | python3 -c "$summary"
  done
done
echo "== bench: seed job"
timeout 120 $B bench --backends cuda,vulkan,cpu --engine fused --peers jax --reps 5 --no-history --json "$OUT/bench.json" --markdown "$OUT/bench.md" 2>>"$OUT/stderr.txt" | tail -n 6
echo "== bench: H = 64"
timeout 100 $B bench --hidden 64 --backends cuda,vulkan --engine fused --peers jax --reps 5 --no-history --markdown "$OUT/bench_h64.md" 2>>"$OUT/stderr.txt" | tail -n 4
echo "== sweep"
for n in 10000 100000 1000000 10000000 100000000; do
  timeout 60 $B bench --backends cuda,vulkan --engine fused --n $n --reps 3 --no-history 2>>"$OUT/stderr.txt" \
    | grep '^| ferrofit' | sed "s/^/n=$n /"
done | tee "$OUT/sweep.txt"
for t in persistent gradients; do
  gunzip -c ".dev/test_$t.gz" > "/tmp/test_$t" && chmod +x "/tmp/test_$t"
  echo "== test $t"
  FERROFIT_REQUIRE_WGPU=1 FERROFIT_REQUIRE_CUDA=1 timeout 150 "/tmp/test_$t" --test-threads 1 --nocapture > "$OUT/test_$t.txt" 2>&1
  grep -E "^test |test result|panicked" "$OUT/test_$t.txt" | sort | uniq -c
done
