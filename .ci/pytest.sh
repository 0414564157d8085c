#!/usr/bin/env bash
# The Python package's suite (python/tests) on the extension module of the
# `ferrofit-python` member, linked from the crates `cargo test --workspace`
# compiled (one set of compiled crates for the tests, the binary and the module). The package is
# staged in the target folder — python/ferrofit plus the module — and pytest
# runs in a virtual environment there (numpy, pytest, safetensors from PyPI;
# FERROFIT_NO_INSTALL=1 uses python3 as it is). Prints pytest's output and one
# cargo-style "test result:" line for .ci/test.sh's sum: skipped tests are
# counted as passed there and written, with their reason, to
# FERROFIT_SKIP_LOG, as the Rust suite's absent devices are.
set -uo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
skips="${FERROFIT_SKIP_LOG:-/dev/null}"
module="$target/debug/lib_native.so"
# `cargo test` leaves the extension module (a cdylib without tests) unbuilt:
# the same workspace build links it from the crates the tests compiled.
cargo build --workspace --quiet || exit 1
py=python3
if [ "${FERROFIT_NO_INSTALL:-0}" != 1 ]; then
  venv="$target/pyvenv"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q numpy pytest safetensors
  py="$venv/bin/python"
elif ! python3 -c 'import numpy, pytest' 2>/dev/null; then
  echo "python suite: numpy or pytest missing for python3" >> "$skips"
  echo "test result: ok. 1 passed; 0 failed"
  exit 0
fi
stage="$target/pypkg"
rm -rf "$stage" && mkdir -p "$stage/ferrofit"
cp python/ferrofit/*.py python/ferrofit/*.pyi python/ferrofit/py.typed "$stage/ferrofit/"
cp "$module" "$stage/ferrofit/_native.abi3.so"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
FERROFIT_BIN="$target/debug/ferrofit" PYTHONPATH="$stage" \
  "$py" -m pytest -rs -p no:cacheprovider python/tests 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
grep -E '^SKIPPED' "$out" | sed 's/^SKIPPED \[[0-9]*\] /python: /' >> "$skips"
# pytest's last line: "== 8 passed, 1 skipped in 20.1s ==" (failed and errors too).
last=$(tail -n1 "$out")
count() { echo "$last" | grep -Eo "[0-9]+ $1" | cut -d' ' -f1 | head -n1; }
passed=$(count passed) skipped=$(count skipped) failed=$(count failed) errors=$(count error)
echo "test result: pytest. $(( ${passed:-0} + ${skipped:-0} )) passed; $(( ${failed:-0} + ${errors:-0} )) failed"
exit "$status"
