#!/usr/bin/env bash
# The test suite, with what it needs: lavapipe (software Vulkan) so the wgpu
# backend is exercised for real on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/install-lavapipe.sh
FERROFIT_REQUIRE_WGPU=1 cargo test --no-fail-fast "$@"
