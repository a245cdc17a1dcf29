#!/usr/bin/env bash
# Sets everything up on a fresh Debian machine, builds Ember (with its CUDA
# targets when nvcc is present) and runs the whole test suite. Tests that need
# a GPU carry the CTest label `gpu` and skip, saying so, when there is none.
# Then every parser's fuzz target runs for EMBER_FUZZ_SECONDS (default 10)
# seconds (scripts/run_fuzz.sh, in build-fuzz/); EMBER_FUZZ_SECONDS=0 skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
ctest --test-dir "${EMBER_BUILD_DIR:-build}" --output-on-failure -j "${EMBER_JOBS:-$(nproc)}"
fuzz_seconds="${EMBER_FUZZ_SECONDS:-10}"
if [[ "$fuzz_seconds" != 0 ]]; then
  scripts/run_fuzz.sh "$fuzz_seconds"
fi
