#!/usr/bin/env bash
# Session 5, second H200 call: the tiled kernel with register blocks (several
# hidden layers) — GPU gradient and deep training tests on CUDA and Vulkan,
# then deep models beside JAX and PyTorch (1-H-…-H-1 ReLU, N = 1e6, 100 SGD steps).
set -u
. benches/device/setup.sh
B=/tmp/ferrofit
for t in gradients training; do
  gunzip -c ".dev/test_$t.gz" > "/tmp/test_$t" && chmod +x "/tmp/test_$t"
done
echo "== test gradients (fused GPU)"
FERROFIT_REQUIRE_WGPU=1 FERROFIT_REQUIRE_CUDA=1 timeout 150 /tmp/test_gradients fused_gpu --test-threads 1 --nocapture > "$OUT/test_gradients.txt" 2>&1
grep -E "^test |test result|panicked" "$OUT/test_gradients.txt" | sort | uniq -c
echo "== test training (fused vs general, seed and deep)"
FERROFIT_REQUIRE_WGPU=1 FERROFIT_REQUIRE_CUDA=1 timeout 200 /tmp/test_training agree --test-threads 1 --nocapture > "$OUT/test_training.txt" 2>&1
grep -E "^test |test result|panicked" "$OUT/test_training.txt" | sort | uniq -c
for hlr in "32 2 5" "64 3 5" "128 4 3"; do
  set -- $hlr
  echo "== bench: H = $1, $2 layers"
  timeout 200 $B bench --hidden $1 --layers $2 --backends cuda,vulkan --engine fused --peers jax,torch --reps $3 --no-history \
    --json "$OUT/bench_h$1_l$2.json" --markdown "$OUT/bench_h$1_l$2.md" 2>>"$OUT/stderr.txt" | tail -n 8
done
