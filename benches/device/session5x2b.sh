#!/usr/bin/env bash
# Session 5, 2x H200, second call: where the N = 1e8 data-parallel stalls sit —
# per-step phase times (FERROFIT_PHASES) of each replica, three runs of two
# replicas and one run of a lone replica.
set -u
. benches/device/setup.sh
B=/tmp/ferrofit
for i in 1 2 3; do
  echo "== two replicas, run $i"
  FERROFIT_PHASES=1 timeout 60 $B train --backend cuda --devices all --engine fused --n 100000000 --steps 100 --out /tmp/r$i 2>&1 | grep -E "^replica|final loss"
done
echo "== one replica (--devices 0)"
FERROFIT_PHASES=1 timeout 60 $B train --backend cuda --devices 0 --engine fused --n 100000000 --steps 100 --out /tmp/r0 2>&1 | grep -E "^replica|final loss"
echo "== one GPU, no data-parallel loop"
timeout 60 $B train --backend cuda --engine fused --n 100000000 --steps 100 --out /tmp/r9 2>&1 | grep -E "final loss"
