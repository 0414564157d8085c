#!/usr/bin/env bash
# Session 4, second H200 call: tests again (the split pass now loads one point
# ahead), lanes per point swept at H = 64 and 128 on CUDA and Vulkan, and the
# N = 1e8 seed job under each launch scheme and tile.
set -u
. benches/device/setup.sh
B=/tmp/ferrofit
for t in persistent gradients; do
  gunzip -c ".dev/test_$t.gz" > "/tmp/test_$t" && chmod +x "/tmp/test_$t"
  echo "== test $t"
  FERROFIT_REQUIRE_WGPU=1 FERROFIT_REQUIRE_CUDA=1 timeout 150 "/tmp/test_$t" --test-threads 1 > "$OUT/test_$t.log" 2>&1
  grep -E "test result|panicked" "$OUT/test_$t.log" | sort | uniq -c
done
echo "== lanes"
for h in 64 128; do
  for l in 1 2 4 8 16 32; do
    timeout 60 $B bench --hidden $h --lanes $l --backends cuda,vulkan --engine fused --reps 3 --no-history 2>>"$OUT/stderr.txt" \
      | grep '^| ferrofit' | sed "s/^/H=$h lanes=$l /"
  done
done | tee "$OUT/lanes.txt"
echo "== N = 1e8"
for opts in "" "--no-persistent" "--no-persistent --points-per-unit 64" "--no-persistent --points-per-unit 256" "--points-per-unit 4"; do
  timeout 90 $B bench --n 100000000 $opts --backends cuda --engine fused --reps 3 --no-history 2>>"$OUT/stderr.txt" \
    | grep '^| ferrofit' | sed "s/^/opts=[$opts] /"
done | tee "$OUT/n1e8.txt"
