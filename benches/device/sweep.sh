#!/usr/bin/env bash
# The fused engine's N sweep on one GPU (CUDA and Vulkan), warm-up off the clock.
set -u
. benches/device/setup.sh
for n in 10000 100000 1000000 10000000 100000000; do
  /tmp/ferrofit bench --backends cuda,vulkan --engine fused --n $n --reps 3 --no-history 2>>"$OUT/stderr.txt" \
    | grep '^| ferrofit' | sed "s/^/n=$n /"
done | tee "$OUT/sweep.txt"
