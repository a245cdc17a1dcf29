#!/bin/bash
# Ember's MPI all-reduce against MPI_Allreduce for 2, 3 and 4 ranks of this
# host (tools/bench/mpi_collectives.cc), over shared memory and over TCP
# (--mca btl tcp,self: the stand-in for hosts on a network). Each line: the
# bytes a rank sent against the bound 2 (N-1)/N x size, both times and their
# ratio, and whether each gave the same bits on every rank and the
# rank-ordered sum. One run; only ratios within it mean something.
#
# Usage: tools/bench/run_collectives.sh [build dir]   (RANKS="2 3 4",
#   FLOATS=65536,1048576,8388608, TRANSPORTS="sm tcp", REPEATS=30)
set -euo pipefail
build=${1:-build}
bench=$(realpath "$build/tools/bench/mpi_collectives")
mpirun=(mpirun --allow-run-as-root --oversubscribe)
for transport in ${TRANSPORTS:-sm tcp}; do
  btl=()
  [[ "$transport" == tcp ]] && btl=(--mca btl tcp,self)
  for n in ${RANKS:-2 3 4}; do
    echo "transport=$transport"
    timeout 600 "${mpirun[@]}" "${btl[@]}" -np "$n" "$bench" \
        --floats="${FLOATS:-65536,1048576,8388608}" --repeats="${REPEATS:-30}"
  done
done
