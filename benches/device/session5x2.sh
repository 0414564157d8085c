#!/usr/bin/env bash
# Session 5, 2x H200: data-parallel checkpoints on CUDA (write at step 50,
# resume to the same final loss as the uninterrupted run), a deep model (tiled
# kernel) data-parallel, and, where nsys exists, a trace of the N = 1e8
# data-parallel run's stalls.
set -u
. benches/device/setup.sh
B=/tmp/ferrofit
common="--backend cuda --devices all --engine fused --optimizer adam --lr 0.01 --steps 100 --log-every 10"
$B train $common --out "$OUT/whole" > /dev/null 2>>"$OUT/stderr.txt"
$B train $common --checkpoint-every 50 --out /tmp/ck > /dev/null 2>>"$OUT/stderr.txt"
ls /tmp/ck/checkpoints
# Resume the second run from its step-50 checkpoint (none is written at the last step).
$B train --resume /tmp/ck --devices all > /dev/null 2>>"$OUT/stderr.txt"
cp /tmp/ck/run.json "$OUT/resumed_run.json"
python3 - "$OUT/whole/run.json" /tmp/ck/run.json <<'PY'
import json, sys
fa, fb = (json.load(open(p))["final_loss"] for p in sys.argv[1:3])
print(f"uninterrupted final loss {fa!r}; resumed at 50: {fb!r}; equal: {fa == fb}; rel {abs(fa-fb)/fa:.3e}")
PY
echo "== deep model (3 x 64), one GPU vs two"
timeout 120 $B bench --backends cuda --devices all --engine fused --hidden 64 --layers 3 --reps 3 --no-history 2>>"$OUT/stderr.txt" | grep '^| ferrofit'
echo "== seed job N = 1e8, one GPU vs two"
timeout 150 $B bench --backends cuda --devices all --engine fused --n 100000000 --reps 3 --no-history 2>>"$OUT/stderr.txt" | grep '^| ferrofit'
if command -v nsys > /dev/null; then
  echo "== nsys: data-parallel N = 1e8"
  timeout 150 nsys profile -o /tmp/dp -t cuda,osrt --force-overwrite true $B train --backend cuda --devices all --engine fused --n 100000000 --steps 100 > /dev/null 2>&1
  nsys stats -r cuda_api_sum,cuda_gpu_kern_sum,osrt_sum /tmp/dp.nsys-rep 2>/dev/null | head -80 > "$OUT/nsys.txt"
  head -60 "$OUT/nsys.txt"
else
  echo "no nsys on this machine"
fi
