#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (one per text parser and one for
# the columnar reader; core and io with ASan and UBSan) with clang into
# build-fuzz/ (or $EMBER_FUZZ_BUILD_DIR) and runs each for N seconds, from the
# seed corpus in tests/fuzz/corpus/<target>. New inputs the fuzzer keeps go to
# <build>/fuzz-corpus/<target>, crashing inputs to
# <build>/fuzz-artifacts/<target>/; any crash fails the script (after every
# target has run). Needs clang and libclang-rt-dev (scripts/install_deps.sh).
# Usage: scripts/run_fuzz.sh [seconds per target, default 20]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-20}"
build_dir="${EMBER_FUZZ_BUILD_DIR:-build-fuzz}"
jobs="${EMBER_JOBS:-$(nproc)}"
targets=(criteo delimited libsvm libffm slot columnar)

# -O1 without NDEBUG: fast enough to fuzz, with the DCHECKs of the parsers on.
CC=clang CXX=clang++ cmake -S . -B "$build_dir" -G Ninja -DEMBER_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" >/dev/null
cmake --build "$build_dir" -j "$jobs"

failed=()
for target in "${targets[@]}"; do
  corpus="$build_dir/fuzz-corpus/$target"
  artifacts="$build_dir/fuzz-artifacts/$target"
  log="$build_dir/fuzz-$target.log"
  mkdir -p "$corpus" "$artifacts"
  status=0
  "$build_dir/tests/fuzz/${target}_fuzz" -max_total_time="$seconds" -max_len=4096 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" "tests/fuzz/corpus/$target" \
    >"$log" 2>&1 || status=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  units=$(find "$corpus" -type f | wc -l)
  if [[ $status -ne 0 ]]; then
    failed+=("$target")
    echo "run_fuzz: $target FAILED (exit $status) after ${execs:-?} runs; see $log and $artifacts"
    grep -m 5 -E "ERROR|runtime error|fuzz invariant|deadly signal" "$log" || true
  else
    echo "run_fuzz: $target ok: ${execs:-?} runs in ${seconds}s, $units new corpus inputs"
  fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "run_fuzz: crashes in: ${failed[*]}"
  exit 1
fi
echo "run_fuzz: ${#targets[@]} targets ran clean for ${seconds}s each"
