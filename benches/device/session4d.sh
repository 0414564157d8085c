#!/usr/bin/env bash
# Session 4, last H200 call: the final code's GPU suites (gradients,
# persistent, training) on CUDA and Vulkan, and `tune` at H = 64 on CUDA
# (its second stage now tries lanes per point).
set -u
. benches/device/setup.sh
for t in persistent gradients training; do
  gunzip -c ".dev/test_$t.gz" > "/tmp/test_$t" && chmod +x "/tmp/test_$t"
  echo "== test $t"
  FERROFIT_REQUIRE_WGPU=1 FERROFIT_REQUIRE_CUDA=1 timeout 200 "/tmp/test_$t" --test-threads 1 > "$OUT/test_$t.log" 2>&1
  grep -E "test result|panicked" "$OUT/test_$t.log" | sort | uniq -c
done
echo "== tune H = 64 (cuda)"
timeout 170 /tmp/ferrofit tune --backend cuda --hidden 64 --budget 120 --cache "$OUT/tuned.json" > "$OUT/tune_h64.txt" 2>>"$OUT/stderr.txt"
tail -n 30 "$OUT/tune_h64.txt"
