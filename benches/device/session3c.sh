#!/usr/bin/env bash
# Session 3, third H200 call (final code): the README's table with every peer,
# H = 64 beside JAX (weights back in shared memory past 64 parameters), the N
# sweep, then the persistent, gradient and training tests on every backend.
set -u
. benches/device/setup.sh
B=/tmp/ferrofit
echo "== bench: seed job"
timeout 200 $B bench --peers torch,jax --reps 5 --no-history --json "$OUT/bench.json" --markdown "$OUT/bench.md" 2>>"$OUT/stderr.txt" | tail -n 10
echo "== bench: H = 64"
timeout 100 $B bench --hidden 64 --backends cuda,vulkan --engine fused --peers jax --reps 5 --no-history --markdown "$OUT/bench_h64.md" 2>>"$OUT/stderr.txt" | tail -n 4
echo "== sweep"
for n in 10000 100000 1000000 10000000 100000000; do
  timeout 60 $B bench --backends cuda,vulkan --engine fused --n $n --reps 3 --no-history 2>>"$OUT/stderr.txt" \
    | grep '^| ferrofit' | sed "s/^/n=$n /"
done | tee "$OUT/sweep.txt"
for t in persistent gradients training; do
  gunzip -c ".dev/test_$t.gz" > "/tmp/test_$t" && chmod +x "/tmp/test_$t"
  echo "== test $t"
  FERROFIT_REQUIRE_WGPU=1 FERROFIT_REQUIRE_CUDA=1 timeout 120 "/tmp/test_$t" --test-threads 1 --nocapture > "$OUT/test_$t.txt" 2>&1
  grep -E "^test |test result|panicked" "$OUT/test_$t.txt" | sort | uniq -c
done
