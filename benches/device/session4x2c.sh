#!/usr/bin/env bash
# Session 4, 2x H200, third call: the clock now starts after a read-back, not
# only a device sync — does the data-parallel first-step cost go away?
set -u
. benches/device/setup.sh
B=/tmp/ferrofit
for n in 100000000 1000000; do
  timeout 150 $B bench --backends cuda --devices all --engine fused --n $n --reps 3 --no-history \
    --json "$OUT/dp_$n.json" 2>>"$OUT/stderr.txt" | grep '^| ferrofit' | sed "s/^/n=$n /"
done | tee "$OUT/dp.txt"
