#!/usr/bin/env bash
# Session 4, first H200 call: wide layers split over lanes (gpu_split) — the
# persistent and gradient tests on CUDA and Vulkan (real plane shuffles), then
# H = 32/64/128 beside JAX and the seed job as a regression check.
set -u
. benches/device/setup.sh
B=/tmp/ferrofit
for t in persistent gradients; do
  gunzip -c ".dev/test_$t.gz" > "/tmp/test_$t" && chmod +x "/tmp/test_$t"
  echo "== test $t"
  FERROFIT_REQUIRE_WGPU=1 FERROFIT_REQUIRE_CUDA=1 timeout 150 "/tmp/test_$t" --test-threads 1 --nocapture > "$OUT/test_$t.txt" 2>&1
  grep -E "^test |test result|panicked" "$OUT/test_$t.txt" | sort | uniq -c
done
for h in 64 128 32; do
  echo "== bench: H = $h"
  timeout 100 $B bench --hidden $h --backends cuda,vulkan --engine fused --peers jax --reps 5 --no-history \
    --json "$OUT/bench_h$h.json" --markdown "$OUT/bench_h$h.md" 2>>"$OUT/stderr.txt" | tail -n 4
done
echo "== bench: seed job"
timeout 100 $B bench --backends cuda,vulkan --engine fused --peers jax --reps 5 --no-history --markdown "$OUT/bench_seed.md" 2>>"$OUT/stderr.txt" | tail -n 4
for h in 64 128; do
  $B train --backend cuda --engine fused --hidden $h --steps 100 --out "$OUT/run_h$h" > /dev/null 2>>"$OUT/stderr.txt"
  grep -h engine_note "$OUT/run_h$h/run.json"
done
