#!/usr/bin/env bash
# After a kernel change: the per-backend tests, then the seed-job bench with JAX.
set -u
bash benches/device/tests.sh
/tmp/ferrofit bench --engine fused --peers jax --reps 5 --no-history --markdown "$OUT/bench_seed_recheck.md" 2>/dev/null | tail -n 6
