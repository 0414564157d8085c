#!/usr/bin/env bash
# `ferrofit doctor` on every device of the GPU machine.
set -u
. benches/device/setup.sh
/tmp/ferrofit doctor --lr 0.5 2> "$OUT/doctor_stderr.txt" | tee "$OUT/doctor.txt"
echo "doctor exit code: ${PIPESTATUS[0]}" | tee -a "$OUT/doctor.txt"
/tmp/ferrofit doctor --json > "$OUT/doctor.json" 2>/dev/null
