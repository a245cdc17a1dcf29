#!/usr/bin/env bash
# Installs Ember's build and test dependencies from Debian packages.
# Idempotent: packages already present are left alone; safe to run again.
# Usage: scripts/install_deps.sh [--with-bench-baseline]
#   --with-bench-baseline  also installs the PyTorch baseline of tools/bench/run.sh:
#                          python3-torch and the OpenMP build of
#                          OpenBLAS (the pthread build fights torch's OpenMP threads).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libtbb-dev                       # oneTBB
  libdnnl-dev ocl-icd-opencl-dev   # oneDNN 2.x; its CMake config needs OpenCL
  librocksdb-dev                   # disk tier
  libgflags-dev libgoogle-glog-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin       # multi-process runs
  zlib1g-dev                       # gzip input
  nlohmann-json3-dev               # JSON (core/json.cc)
  libxxhash-dev                    # xxHash (core/checksum.cc, header only)
  xz-utils                         # the device pack (scripts/pack_for_device.sh, PackTest)
  python3-numpy                    # tests/tools/bench_data_test.py (the bench suite's data)
  clang libclang-rt-dev libomp-dev # libFuzzer targets: libFuzzer and sanitizer
                                   # runtimes, OpenMP for clang (scripts/run_fuzz.sh)
)
if [[ "${1:-}" == "--with-bench-baseline" ]]; then
  packages+=(python3-torch libopenblas0-openmp)
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install_deps: all ${#packages[@]} packages already installed"
  exit 0
fi

echo "install_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get -o DPkg::Lock::Timeout=300 update -qq
$sudo apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${missing[@]}"
echo "install_deps: done"
