#!/usr/bin/env bash
# Session 4, 2x H200 (nvidia-h200-x2): data parallelism with the all-reduce on
# the CPU backend — the equality test, then `bench --devices all` (one GPU
# beside both, one table) at N = 1e8 and 1e6 on CUDA and Vulkan; then the
# README's seed-job table and H = 64 beside the peers on one GPU of the same host.
set -u
. benches/device/setup.sh
gunzip -c .dev/test_parallel.gz > /tmp/test_parallel && chmod +x /tmp/test_parallel
FERROFIT_REQUIRE_WGPU=1 FERROFIT_REQUIRE_CUDA=1 timeout 200 /tmp/test_parallel --nocapture 2>&1 | grep -E "^test |test result|testing on|panicked" | tee "$OUT/test_parallel.txt"
B=/tmp/ferrofit
$B devices > "$OUT/devices.txt"
for n in 100000000 1000000; do
  echo "== bench --devices all, N = $n"
  timeout 200 $B bench --backends cuda,vulkan --devices all --engine fused --n $n --reps 3 --no-history \
    --json "$OUT/dp_$n.json" --markdown "$OUT/dp_$n.md" 2>>"$OUT/stderr.txt" | grep '^| ferrofit'
done
echo "== seed job beside the peers"
timeout 150 $B bench --peers torch,jax --reps 5 --no-history --json "$OUT/bench.json" --markdown "$OUT/bench.md" 2>>"$OUT/stderr.txt" | grep '^| '
echo "== H = 64 beside JAX (default lanes)"
timeout 100 $B bench --hidden 64 --backends cuda,vulkan --engine fused --peers jax --reps 5 --no-history --markdown "$OUT/bench_h64.md" 2>>"$OUT/stderr.txt" | grep '^| '
