#!/usr/bin/env bash
# Builds Ember's libraries, tools and tests with sanitizers and runs the test
# suite under each (no CUDA targets; GPU tests would skip anyway):
#   address  ASan + UBSan, in build-asan/: every test, then the crash test
#            (tools/crashtest) with the ASan-built ember, so that a kill,
#            restart or resume that touches freed or uninitialised memory
#            fails it;
#   thread   TSan, in build-tsan/: every test but the crash test (each of its
#            jobs is itself a test of the ember binary, far slower under TSan).
# Any sanitizer report fails the test it happens in. The libraries Ember
# links (oneTBB, oneDNN/OpenMP, RocksDB) are not instrumented: what TSan
# cannot see inside them is listed in scripts/tsan.supp, each with its reason.
# Usage: scripts/run_sanitizers.sh [address|thread|all]   (default all)
# Runs for long on 2 cores (each build ~25 minutes, each suite 5-20 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
which="${1:-all}"
jobs="${EMBER_JOBS:-$(nproc)}"
scripts/install_deps.sh
status=0

run_suite() {  # <sanitizer> <build dir> <ctest args...>
  local sanitizer="$1" dir="$2"
  shift 2
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_CUDA=OFF \
    -DEMBER_BUILD_BENCH=OFF -DEMBER_SANITIZE="$sanitizer" >/dev/null
  cmake --build "$dir" -j "$jobs"
  echo "== $sanitizer: test suite"
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" "$@" || status=1
}

if [[ "$which" == address || "$which" == all ]]; then
  # detect_leaks=0: the process-lifetime singletons of the libraries would be
  # reported as leaks. allocator_may_return_null=1: an allocation too large
  # returns null as glibc's does, which Ember turns into ResourceExhausted
  # (tested), instead of ASan aborting.
  export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=1:allocator_may_return_null=1"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  run_suite address build-asan
  echo "== address: crash test"
  /usr/bin/python3 tools/crashtest/crashtest.py --ember=build-asan/tools/ember \
    --kills="${EMBER_SANITIZER_CRASHTEST_KILLS:-60}" || status=1
  unset ASAN_OPTIONS UBSAN_OPTIONS
fi
if [[ "$which" == thread || "$which" == all ]]; then
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:allocator_may_return_null=1:suppressions=$PWD/scripts/tsan.supp"
  run_suite thread build-tsan -LE crash
  unset TSAN_OPTIONS
fi
exit "$status"
