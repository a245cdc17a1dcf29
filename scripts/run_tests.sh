#!/usr/bin/env bash
# Sets everything up on a fresh Debian machine, builds Ember (with its CUDA
# targets when nvcc is present) and runs the whole test suite. Tests that need
# a GPU carry the CTest label `gpu` and skip, saying so, when there is none.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
ctest --test-dir "${EMBER_BUILD_DIR:-build}" --output-on-failure -j "${EMBER_JOBS:-$(nproc)}"
