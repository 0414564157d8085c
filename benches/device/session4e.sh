#!/usr/bin/env bash
# Session 4: `tune` at H = 64 on CUDA and Vulkan after its untimed warm-up per
# candidate (call 4 showed new kernels cut off by their compile time).
set -u
. benches/device/setup.sh
for be in cuda vulkan; do
  echo "== tune H = 64 ($be)"
  timeout 140 /tmp/ferrofit tune --backend $be --hidden 64 --budget 100 --cache "$OUT/tuned.json" > "$OUT/tune_h64_$be.txt" 2>"$OUT/tune_h64_$be.log"
  grep -E "lanes|best:" "$OUT/tune_h64_$be.log" "$OUT/tune_h64_$be.txt" | head -n 20
done
