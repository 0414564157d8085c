#!/usr/bin/env bash
# Session 5, first H200 call: the tiled kernel (gpu_tiled, several hidden
# layers) — GPU gradient and deep training tests on CUDA and Vulkan, then deep
# models beside JAX and PyTorch (1-H-…-H-1 ReLU, N = 1e6, 100 SGD steps).
set -u
. benches/device/setup.sh
B=/tmp/ferrofit
gunzip -c .dev/test_gradients.gz > /tmp/test_gradients && chmod +x /tmp/test_gradients
gunzip -c .dev/test_training.gz > /tmp/test_training && chmod +x /tmp/test_training
echo "== test gradients (fused GPU)"
FERROFIT_REQUIRE_WGPU=1 FERROFIT_REQUIRE_CUDA=1 timeout 150 /tmp/test_gradients fused_gpu --test-threads 1 --nocapture > "$OUT/test_gradients.txt" 2>&1
grep -E "^test |test result|panicked" "$OUT/test_gradients.txt" | sort | uniq -c
echo "== test training (deep fused vs general)"
FERROFIT_REQUIRE_WGPU=1 FERROFIT_REQUIRE_CUDA=1 timeout 150 /tmp/test_training deep --test-threads 1 --nocapture > "$OUT/test_training.txt" 2>&1
grep -E "^test |test result|panicked" "$OUT/test_training.txt" | sort | uniq -c
for hl in "32 2" "64 3" "128 4"; do
  set -- $hl
  echo "== bench: H = $1, $2 layers"
  timeout 150 $B bench --hidden $1 --layers $2 --backends cuda,vulkan --engine fused --peers jax,torch --reps 5 --no-history \
    --json "$OUT/bench_h$1_l$2.json" --markdown "$OUT/bench_h$1_l$2.md" 2>>"$OUT/stderr.txt" | tail -n 9
done
$B train --backend cuda --engine fused --hidden 64 --layers 3 --steps 100 --out "$OUT/run_h64_l3" > /dev/null 2>>"$OUT/stderr.txt"
grep -h -E "engine_note|final_loss" "$OUT/run_h64_l3/run.json"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
