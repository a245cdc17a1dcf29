#!/usr/bin/env bash
# Configures and builds Ember in Release into build/ (or $EMBER_BUILD_DIR).
# Extra arguments go to the CMake configure step, e.g. -DEMBER_CUDA=OFF.
# EMBER_BUILD_TARGET=ember builds one target only (default: everything).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${EMBER_BUILD_DIR:-build}"
jobs="${EMBER_JOBS:-$(nproc)}"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$build_dir" -j "$jobs" ${EMBER_BUILD_TARGET:+--target "$EMBER_BUILD_TARGET"}
