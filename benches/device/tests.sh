#!/usr/bin/env bash
# Runs the per-backend test binaries (built here with `cargo test --no-run`,
# stripped and gzipped into .dev/) on the GPU machine, where `targets()` finds
# CUDA and the NVIDIA Vulkan device besides the CPU.
set -u
. benches/device/setup.sh
for t in gradients training; do
  gunzip -c ".dev/test_$t.gz" > "/tmp/test_$t" && chmod +x "/tmp/test_$t"
  echo "== $t"
  FERROFIT_REQUIRE_WGPU=1 FERROFIT_REQUIRE_CUDA=1 timeout 400 "/tmp/test_$t" --test-threads 1 --nocapture 2>&1 | tee "$OUT/test_$t.txt" | grep -E "^test |test result|panicked|testing on" | sort | uniq -c
done
