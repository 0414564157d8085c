#!/usr/bin/env bash
# The test suite, with what it needs: lavapipe (software Vulkan) so the wgpu
# backend is exercised for real on a machine without a GPU, and Chromium for
# the HTML report's end-to-end test. Ends with one
# "tests: N passed, M failed" line summing every test binary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/install-lavapipe.sh
bash .ci/install-chromium.sh
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
FERROFIT_REQUIRE_WGPU=1 FERROFIT_REQUIRE_CHROMIUM=1 cargo test --workspace --no-fail-fast "$@" 2>&1 | tee "$log" || status=$?
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
