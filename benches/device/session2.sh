#!/usr/bin/env bash
# Session 2 on the H200, one call: the per-backend tests (incl. the doctor's
# broken-device fakes), the README's bench table with peers, doctor on every
# device, tune on CUDA and Vulkan, and the PyTorch load check of a saved model.
set -u
bash benches/device/tests.sh
gunzip -c .dev/test_doctor.gz > /tmp/test_doctor && chmod +x /tmp/test_doctor
FERROFIT_REQUIRE_WGPU=1 FERROFIT_REQUIRE_CUDA=1 timeout 120 /tmp/test_doctor --test-threads 1 2>&1 | grep -E "^test |test result" | tee "$OUT/test_doctor.txt"
B=/tmp/ferrofit
$B devices > "$OUT/devices.txt" 2>&1
echo "== bench"
timeout 200 $B bench --peers torch,jax --reps 5 --no-history --json "$OUT/bench.json" --markdown "$OUT/bench.md" --plot "$OUT/bench.svg" 2>> "$OUT/stderr.txt" | tail -n 12
echo "== doctor"
timeout 150 $B doctor --json > "$OUT/doctor.json" 2>> "$OUT/stderr.txt"; echo "doctor rc=$?"
timeout 100 $B doctor 2>/dev/null | grep -E "^[a-z]|warn|FAIL|largest|features" | head -n 30
echo "== tune"
for b in cuda vulkan; do
  timeout 90 $B tune --backend $b --budget 60s --cache "$OUT/tuned.json" 2>> "$OUT/stderr.txt" > "$OUT/tune_$b.md"; echo "tune $b rc=$?"
  head -n 8 "$OUT/tune_$b.md"; tail -n 2 "$OUT/tune_$b.md"
done
echo "== torch load"
$B train --backend cuda --out /tmp/run --json > "$OUT/train_cuda.json" 2>> "$OUT/stderr.txt"
$B predict --model /tmp/run --x -1,-0.5,0,0.25,0.9 > /tmp/pred.csv
python3 benches/device/torch_load.py /tmp/run /tmp/pred.csv 2>&1 | tail -n 2 | tee "$OUT/torch_load.txt"
$B report /tmp/run/run.json "$OUT/bench.json" "$OUT/doctor.json" -o "$OUT/report.html" > /dev/null
