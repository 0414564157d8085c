#!/usr/bin/env bash
# Session 5, third H200 call: the tiled kernel keeping only a for
# relu/tanh/sigmoid, 4-point blocks — the second call's tests and benches
# (session5b.sh) again, then a gelu model (which keeps z).
set -u
bash benches/device/session5b.sh
. benches/device/setup.sh
B=/tmp/ferrofit
echo "== bench: H = 64, 3 layers, gelu (keeps z)"
timeout 100 $B bench --hidden 64 --layers 3 --activation gelu --backends cuda,vulkan --engine fused --reps 5 --no-history --markdown "$OUT/bench_h64_l3_gelu.md" 2>>"$OUT/stderr.txt" | tail -n 3
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
