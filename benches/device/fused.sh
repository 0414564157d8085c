#!/usr/bin/env bash
# Fused-engine benchmarks on the GPU machine, all in one call: the seed job on
# every backend with the PyTorch/JAX peers, H = 32 (the GPU kernel's widest),
# a points-per-unit sweep, an N sweep on CUDA and Vulkan, and a cross-backend
# check of the trained weights.
set -u
. benches/device/setup.sh
B=/tmp/ferrofit
$B devices > "$OUT/devices.txt" 2>&1
echo "== seed job, fused engine, every backend, peers"
timeout 240 $B bench --engine fused --peers torch,jax --reps 5 --json "$OUT/bench_seed.json" --markdown "$OUT/bench_seed.md" 2>> "$OUT/stderr.txt"
echo "== H = 32"
timeout 90 $B bench --backends cuda,vulkan --engine fused --hidden 32 --peers jax --reps 5 --markdown "$OUT/bench_h32.md" 2>> "$OUT/stderr.txt" | tail -n 5
echo "== points per unit (seed job)"
for ppu in 4 16 64; do
  echo "ppu $ppu"; timeout 60 $B bench --backends cuda,vulkan --engine fused --reps 5 --points-per-unit $ppu 2>> "$OUT/stderr.txt" | grep '^| ferrofit'
done | tee "$OUT/ppu.txt"
echo "== N sweep"
for b in cuda vulkan; do
  for n in 10000 100000 1000000 10000000 100000000; do
    timeout 90 $B bench --backends $b --engine fused --n $n --reps 3 --csv "$OUT/s.csv" 2>> "$OUT/stderr.txt" > /dev/null
    tail -n +2 "$OUT/s.csv" | sed "s/^/$n,/" >> "$OUT/sweep.csv"
  done
done
rm -f "$OUT/s.csv"; cut -d, -f1,3,6,14 "$OUT/sweep.csv"
echo "== weights after training agree across backends (host data, same init)"
for b in cpu cuda vulkan; do
  $B train --backend $b --engine fused --host-data --log-every 1 --json --out "/tmp/m_$b" > /dev/null 2>> "$OUT/stderr.txt"
done
python3 benches/device/compare_weights.py /tmp/m_cpu /tmp/m_cuda /tmp/m_vulkan | tee "$OUT/weights_check.txt"
tail -n 5 "$OUT/stderr.txt"
