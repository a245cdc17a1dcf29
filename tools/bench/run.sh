#!/usr/bin/env bash
# Ember against its PyTorch baseline, end to end (issue 8): installs what is
# missing (scripts/install_deps.sh --with-bench-baseline), builds Ember in
# Release, measures this machine's limits, runs every case with the two
# engines alternately and writes results.{md,csv,svg,json} and the logs of
# every run to the output folder (tools/bench/suite.py says what is run).
#   tools/bench/run.sh [--quick] [suite.py flags, e.g. --repeats=3 --seeds=1,2,3]
# Environment: BUILD_DIR (default build-bench-suite, reused when present),
# OUT (default out/bench, git-ignored), WORK (prepared data; default
# $TMPDIR/ember-bench-work, never inside the repository), JOBS (build jobs,
# default: all cores), EMBER_SHARED_DATA (the real data sets; default
# ../shared/data beside the checkout).
# --quick: a smoke run of a few minutes (fewer rows, one repeat, one seed).
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ in the checkout
cd "$(dirname "$0")/../.."
start=$(date +%s)
build_dir=${BUILD_DIR:-build-bench-suite}
out=${OUT:-out/bench}
work=${WORK:-${TMPDIR:-/tmp}/ember-bench-work}
jobs=${JOBS:-$(nproc)}
say() { echo "[run.sh $(date +%H:%M:%S)] $*"; }

quick=()
if [[ "${1:-}" == "--quick" ]]; then
  shift
  quick=(--gen_rows=40000 --repeats=1 --seeds=1)
fi

say "load average: $(cut -d' ' -f1-3 /proc/loadavg); dependencies"
scripts/install_deps.sh --with-bench-baseline
if ! /usr/bin/python3 -c 'import torch, numpy' 2>/dev/null; then
  echo "run.sh: /usr/bin/python3 cannot import torch and numpy" >&2
  exit 1
fi

say "building Ember (Release) in $build_dir"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=OFF \
  -DEMBER_BUILD_TESTS=OFF >/dev/null
cmake --build "$build_dir" --target ember dense_bench embedding_bench -j"$jobs"

say "benchmarks (output in $out)"
mkdir -p "$out"
/usr/bin/python3 tools/bench/suite.py --ember="$build_dir/tools/ember" \
  --dense_bench="$build_dir/tools/bench/dense_bench" \
  --embedding_bench="$build_dir/tools/bench/embedding_bench" \
  --out="$out" --work="$work" "${quick[@]}" "$@"
say "run.sh took $(( $(date +%s) - start )) s end to end"
