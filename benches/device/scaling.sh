#!/usr/bin/env bash
# Data-parallel scaling on a multi-GPU machine (device kind nvidia-h200-x2 or
# larger): the equality test on every backend, then the seed job at N = 1e8
# and N = 1e6 on one GPU and on all of them, three runs each.
set -u
. benches/device/setup.sh
gunzip -c .dev/test_parallel.gz > /tmp/test_parallel && chmod +x /tmp/test_parallel
FERROFIT_REQUIRE_WGPU=1 FERROFIT_REQUIRE_CUDA=1 timeout 200 /tmp/test_parallel --nocapture 2>&1 | grep -E "^test |test result|testing on|panicked" | tee "$OUT/test_parallel.txt"
B=/tmp/ferrofit
$B devices | tee "$OUT/devices.txt"
for n in 200000000 100000000 1000000; do
  for devs in "" "--devices all"; do
    for rep in 1 2 3; do
      printf "n=%s devices=%s rep=%s " "$n" "${devs:-one}" "$rep"
      $B train --backend cuda $devs --n $n --steps 100 --log-every 100 --json 2>>"$OUT/stderr.txt" \
        | python3 -c "import json,sys; r=json.load(sys.stdin); print(f\"total {r['train_seconds']*1e3:.2f} ms, first step {r['first_step_seconds']*1e3:.2f} ms, steady {(r['train_seconds']-r['first_step_seconds'])/(r['steps']-1)*1e3:.3f} ms/step, loss {r['final_loss']:.6f} {r.get('engine_note') or ''}\")"
    done
  done
done | tee "$OUT/scaling.txt"
