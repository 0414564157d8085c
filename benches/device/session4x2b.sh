#!/usr/bin/env bash
# Session 4, 2x H200, second call: where data parallelism loses time at
# N = 1e8 — one GPU with two launches per step (what a replica runs), the
# data-parallel loop with one replica on each GPU alone, both GPUs, and two
# replicas sharing GPU 0.
set -u
. benches/device/setup.sh
B=/tmp/ferrofit
for n in 100000000 1000000; do
  for devs in "" "--devices 0" "--devices 1" "--devices 0,1" "--devices 0,0"; do
    timeout 100 $B bench --backends cuda $devs --no-persistent --engine fused --n $n --reps 3 --no-history 2>>"$OUT/stderr.txt" \
      | grep '^| ferrofit' | sed "s/^/n=$n [${devs:-one GPU, two launches}] /"
  done
done | tee "$OUT/dp_diag.txt"
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
