#!/usr/bin/env bash
# Session 4, third H200 call: fewer instructions per point (w2 applied once
# per pass for single-output models, z and act(z) kept for narrow layers).
# Tests on CUDA and Vulkan, then the previous binary (ferrofit_old) and the new
# one alternately: seed job, N = 1e8 and H = 64.
set -u
. benches/device/setup.sh
gunzip -c .dev/ferrofit_old.gz > /tmp/ferrofit_old && chmod +x /tmp/ferrofit_old
for t in persistent gradients; do
  gunzip -c ".dev/test_$t.gz" > "/tmp/test_$t" && chmod +x "/tmp/test_$t"
  echo "== test $t"
  FERROFIT_REQUIRE_WGPU=1 FERROFIT_REQUIRE_CUDA=1 timeout 150 "/tmp/test_$t" --test-threads 1 > "$OUT/test_$t.log" 2>&1
  grep -E "test result|panicked" "$OUT/test_$t.log" | sort | uniq -c
done
for job in "--n 1000000" "--n 100000000" "--hidden 64"; do
  for round in 1 2; do
    for bin in old new; do
      B=/tmp/ferrofit; [ $bin = old ] && B=/tmp/ferrofit_old
      timeout 90 $B bench $job --backends cuda,vulkan --engine fused --reps 3 --no-history 2>>"$OUT/stderr.txt" \
        | grep '^| ferrofit' | sed "s/^/[$job] $bin round $round /"
    done
  done
done | tee "$OUT/ab.txt"
echo "== seed job beside JAX (new)"
timeout 100 /tmp/ferrofit bench --backends cuda,vulkan --engine fused --peers jax --reps 5 --no-history --markdown "$OUT/bench_seed.md" 2>>"$OUT/stderr.txt" | grep '^| '
