#!/usr/bin/env bash
# Session 3 on the H200, one call: the grid the persistent kernel's probe
# picks (and its loss beside two launches per step), the seed job beside the
# peers, H = 64 beside JAX, the N sweep with and without the persistent kernel,
# then the test binaries on CPU, Vulkan and CUDA. Everything lands in $OUT.
set -u
. benches/device/setup.sh
B=/tmp/ferrofit
summary='import json,sys; r=json.load(sys.stdin); print(f"{r[\"train_seconds\"]*1e3:.3f} ms, loss {r[\"final_loss\"]:.6f}, {r.get(\"engine_note\")}")'
echo "== grid (seed job, one train each)"
for b in cuda vulkan; do
  for p in "" --no-persistent; do
    printf "%s %s: " $b "${p:-persistent}"
    $B train --backend $b --log-every 100 $p --json 2>>"$OUT/stderr.txt" | python3 -c "$summary"
  done
done
echo "== bench: seed job"
timeout 200 $B bench --peers torch,jax --reps 5 --no-history --json "$OUT/bench.json" --markdown "$OUT/bench.md" 2>>"$OUT/stderr.txt" | tail -n 14
echo "== bench: H = 64"
timeout 120 $B bench --hidden 64 --backends cuda,vulkan --engine fused --peers jax --reps 5 --no-history --markdown "$OUT/bench_h64.md" 2>>"$OUT/stderr.txt" | tail -n 8
echo "== sweep"
for n in 10000 100000 1000000 10000000 100000000; do
  for p in "" --no-persistent; do
    timeout 60 $B bench --backends cuda,vulkan --engine fused --n $n --reps 3 --no-history $p 2>>"$OUT/stderr.txt" \
      | grep '^| ferrofit' | sed "s/^/n=$n ${p:-persistent} /"
  done
done | tee "$OUT/sweep.txt"
for t in persistent gradients training; do
  gunzip -c ".dev/test_$t.gz" > "/tmp/test_$t" && chmod +x "/tmp/test_$t"
  echo "== test $t"
  FERROFIT_REQUIRE_WGPU=1 FERROFIT_REQUIRE_CUDA=1 timeout 110 "/tmp/test_$t" --test-threads 1 --nocapture > "$OUT/test_$t.txt" 2>&1
  grep -E "^test |test result|panicked" "$OUT/test_$t.txt" | sort | uniq -c
done
