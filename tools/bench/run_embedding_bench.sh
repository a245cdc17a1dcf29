#!/usr/bin/env bash
# Builds and runs the embedding benchmarks of issue 4: Pull + Push throughput
# (in memory and tiered, ratios against the random-gather limit and against
# all in memory) and the peak RSS of a table four times its memory budget.
#   tools/bench/run_embedding_bench.sh [build dir] [embedding_bench flags...]
# Environment: THREADS (default 2), BENCH_DIR (default /tmp).
set -euo pipefail
cd "$(dirname "$0")/../.."
build_dir=${1:-build-bench}
shift || true
threads=${THREADS:-2}
bench_dir=${BENCH_DIR:-/tmp}

cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=OFF \
  -DEMBER_BUILD_TESTS=OFF >/dev/null
cmake --build "$build_dir" --target embedding_bench embedding_rss -j"$threads"

# No OpenMP here, but other Ember libraries may load libgomp: keep idle
# OpenMP threads from spinning on the benchmark's cores.
export OMP_WAIT_POLICY=passive
"$build_dir/tools/bench/embedding_bench" --threads="$threads" --bench_dir="$bench_dir" \
  --benchmark_min_time=0.2 "$@"
echo
"$build_dir/tools/bench/embedding_rss" --threads="$threads" --bench_dir="$bench_dir"
