#!/usr/bin/env bash
# Fused-engine benchmarks on the GPU machine, all in one call: the seed job on
# every backend with the PyTorch/JAX peers, H = 32 (the GPU kernel's widest),
# an N sweep on CUDA and Vulkan, and a cross-backend check of the trained weights.
set -u
. benches/device/setup.sh
B=/tmp/ferrofit
$B devices > "$OUT/devices.txt" 2>&1
echo "== seed job, fused engine, every backend, peers"
timeout 240 $B bench --engine fused --peers torch,jax --reps 5 --json "$OUT/bench_seed.json" --markdown "$OUT/bench_seed.md" 2>> "$OUT/stderr.txt"
echo "== H = 32"
timeout 90 $B bench --backends cuda,vulkan --engine fused --hidden 32 --peers jax --reps 5 --json "$OUT/bench_h32.json" 2>> "$OUT/stderr.txt" | tail -n 6
echo "== N sweep"
for n in 10000 100000 1000000 10000000 100000000; do
  for b in cuda vulkan; do
    timeout 90 $B bench --backends $b --engine fused --n $n --reps 3 --csv "$OUT/sweep_${b}_$n.csv" 2>> "$OUT/stderr.txt" > /dev/null
  done
done
cat "$OUT"/sweep_*.csv | grep -v '^name' | sort -t, -k2,2 -k4n > "$OUT/sweep.csv"; rm -f "$OUT"/sweep_*_*.csv
echo "== weights after training agree across backends (host data, same init)"
for b in cpu cuda vulkan; do
  $B train --backend $b --engine fused --host-data --log-every 1 --json --out "/tmp/m_$b" > "$OUT/train_$b.json" 2>> "$OUT/stderr.txt"
done
python3 - <<'PY' | tee "$OUT/weights_check.txt"
import json, struct
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8+n]); out = {}
    for k, v in h.items():
        if k == "__metadata__": continue
        s, e = v["data_offsets"]; raw = b[8+n+s:8+n+e]; out[k] = struct.unpack(f"<{len(raw)//4}f", raw)
    return out
ref = load("/tmp/m_cpu/model.safetensors")
for b in ["cuda", "vulkan"]:
    try:
        m = load(f"/tmp/m_{b}/model.safetensors")
        d = max(abs(x - y) for k in ref for x, y in zip(ref[k], m[k]))
        c = [p["loss"] for p in json.load(open(f"/tmp/m_{b}/run.json"))["loss_curve"]]
        r = [p["loss"] for p in json.load(open("/tmp/m_cpu/run.json"))["loss_curve"]]
        print(f"{b}: max |w - w_cpu| = {d:.3e}; max rel loss-curve diff = {max(abs(x-y)/y for x, y in zip(c, r)):.3e}")
    except Exception as e:
        print(f"{b}: {e!r}")
PY
tail -n 20 "$OUT/stderr.txt"
