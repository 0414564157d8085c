#!/usr/bin/env bash
# Session 5, 2x H200, fourth call: the carry is zeroed in place (one fresh buffer a step fewer) —
# phase times again (two runs), and bench's one-GPU vs two-GPU rows at N = 1e8.
set -u
. benches/device/setup.sh
B=/tmp/ferrofit
for i in 1 2; do
  echo "== two replicas, run $i"
  FERROFIT_PHASES=1 timeout 60 $B train --backend cuda --devices all --engine fused --n 100000000 --steps 100 --out /tmp/r$i 2>&1 | grep -E "^replica|final loss"
done
echo "== bench N = 1e8"
timeout 150 $B bench --backends cuda --devices all --engine fused --n 100000000 --reps 5 --no-history 2>>"$OUT/stderr.txt" | grep '^| ferrofit'
