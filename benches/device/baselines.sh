#!/usr/bin/env bash
# Seed-job baselines on the GPU machine: ferrofit on every backend (5 runs each)
# and the PyTorch/JAX peers, all in one call. Results land in $OUT as JSON lines.
set -u
. benches/device/setup.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
/tmp/ferrofit devices | tee "$OUT/devices.txt"
run() {  # run LABEL ARGS...: five seed-job runs as JSON lines
  local label=$1; shift
  for i in 1 2 3 4 5; do
    timeout 300 /tmp/ferrofit train --json "$@" >> "$OUT/ferrofit.jsonl" 2>> "$OUT/stderr.txt" || echo "{\"failed\":\"$label\"}" >> "$OUT/ferrofit.jsonl"
  done
  echo "done $label"
}
run cuda-general --backend cuda --engine general
run vulkan-general --backend vulkan --engine general
run cpu-fused --backend cpu --engine fused
run cpu-general --backend cpu --engine general
python3 benches/peers/seed_job.py > "$OUT/peers.jsonl" 2>> "$OUT/stderr.txt"
python3 benches/peers/seed_job.py --cpu --only torch-eager,jax-jit > "$OUT/peers_cpu.jsonl" 2>> "$OUT/stderr.txt"
tail -n 5 "$OUT/stderr.txt"
python3 benches/summarize.py "$OUT"/ferrofit.jsonl "$OUT"/peers.jsonl "$OUT"/peers_cpu.jsonl | tee "$OUT/summary.md"
