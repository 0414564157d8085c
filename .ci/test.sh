#!/usr/bin/env bash
# The test suite, with what it needs. It installs, when missing:
#   - lavapipe (Debian's mesa-vulkan-drivers, from bookworm-backports on
#     Debian 12): a software Vulkan device, so the wgpu backend is tested for
#     real on a machine without a GPU;
#   - Chromium (Debian's): the HTML report's end-to-end test renders the page
#     and looks at a screenshot;
#   - the palmerpenguins wheel (PyPI, only downloaded and unpacked into the
#     target folder): a real public data set with text columns and `NA` cells
#     for tests/datafiles.rs;
#   - numpy, pytest and safetensors (PyPI) in a virtual environment in the
#     target folder, for the Python package's suite (python/tests), which runs
#     on the extension module `cargo test` built from the same compiled crates.
# FERROFIT_NO_INSTALL=1 skips all four, for a machine whose owner provides
# them another way (FERROFIT_PENGUINS may then name the CSV; without it, that
# test is reported skipped; without numpy and pytest for python3, the Python
# suite is). Ends with one
# "tests: N passed, M failed, K skipped" line summing every test binary: a
# per-device test whose device is absent (or that a software device would
# take minutes over, saying why) records itself in the skip log and counts
# as skipped, not passed. Every backend this machine has is required.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${FERROFIT_NO_INSTALL:-0}" != 1 ]; then
  bash .ci/install-lavapipe.sh
  bash .ci/install-chromium.sh
  target="${CARGO_TARGET_DIR:-target}"
  FERROFIT_PENGUINS="${FERROFIT_PENGUINS:-$(bash .ci/fetch-penguins.sh "$target/data")}"
  export FERROFIT_PENGUINS
fi
log=$(mktemp)
skips=$(mktemp)
trap 'rm -f "$log" "$skips"' EXIT
# A machine with an NVIDIA device must run the CUDA tests, not skip them.
[ -e /dev/nvidia0 ] && export FERROFIT_REQUIRE_CUDA=1
status=0
FERROFIT_REQUIRE_WGPU=1 FERROFIT_REQUIRE_CHROMIUM=1 FERROFIT_SKIP_LOG="$skips" \
  cargo test --workspace --no-fail-fast "$@" 2>&1 | tee "$log" || status=$?
FERROFIT_SKIP_LOG="$skips" bash .ci/pytest.sh 2>&1 | tee -a "$log" || status=$?
if [ -s "$skips" ]; then
  echo "skipped (device absent, or too slow on a software device):"
  sed 's/^/  /' "$skips"
fi
awk -v s="$(wc -l < "$skips")" \
  '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
   END { printf "tests: %d passed, %d failed, %d skipped\n", p - s, f, s }' "$log"
exit "$status"
