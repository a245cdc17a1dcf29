#!/usr/bin/env bash
# Sets everything up on a fresh Debian machine, builds Ember (with its CUDA
# targets when nvcc is present) and runs the whole test suite. Tests that need
# a GPU carry the CTest label `gpu` and skip, saying so, when there is none.
# Then the tests labelled `mpi` run again with OpenMPI's TCP transport alone
# (the ob1 messaging layer with the tcp and self BTLs; EMBER_MPI_TCP=0 skips
# it), the stand-in for ranks on hosts of a network (README, "Several
# hosts"). Then every parser's fuzz target runs for EMBER_FUZZ_SECONDS (default 10)
# seconds (scripts/run_fuzz.sh, in build-fuzz/); EMBER_FUZZ_SECONDS=0 skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
ctest --test-dir "${EMBER_BUILD_DIR:-build}" --output-on-failure -j "${EMBER_JOBS:-$(nproc)}"
if [[ "${EMBER_MPI_TCP:-1}" != 0 ]]; then
  echo "run_tests: the MPI tests again, over TCP only (OMPI_MCA_pml=ob1 OMPI_MCA_btl=tcp,self)"
  OMPI_MCA_pml=ob1 OMPI_MCA_btl=tcp,self \
    ctest --test-dir "${EMBER_BUILD_DIR:-build}" --output-on-failure -j "${EMBER_JOBS:-$(nproc)}" \
      -L mpi
fi
fuzz_seconds="${EMBER_FUZZ_SECONDS:-10}"
if [[ "$fuzz_seconds" != 0 ]]; then
  scripts/run_fuzz.sh "$fuzz_seconds"
fi
