#!/usr/bin/env bash
# Packs Ember's binaries (CUDA on) with the shared libraries they need, other
# than the CUDA toolkit's and the C runtime's, into .device/ember-device.tar.xz
# for a GPU machine that has CUDA but none of Ember's Debian libraries.
# There, in the repository root:
#   tar -xJf .device/ember-device.tar.xz -C /tmp && /tmp/ember-device/run_gpu_tests.sh
# (run_gpu_tests.sh sets LD_LIBRARY_PATH and runs every `gpu`-labelled test
# binary, then any gpu benchmark found in bench/.)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${EMBER_BUILD_DIR:-build-device}"
EMBER_BUILD_DIR="$build_dir" scripts/build.sh -DEMBER_CUDA=ON

stage=$(mktemp -d)/ember-device
mkdir -p "$stage/bin" "$stage/lib" "$stage/bench"
binaries=("$build_dir/tools/ember" "$build_dir/tests/gpu/ember_gpu_tests")
for b in "$build_dir"/tools/bench/*_gpu_bench; do [[ -x "$b" ]] && binaries+=("$b"); done
for b in "${binaries[@]}"; do
  case "$b" in *_bench) cp "$b" "$stage/bench/" ;; *) cp "$b" "$stage/bin/" ;; esac
  # Libraries that the device lacks: everything but the C runtime, the
  # dynamic loader and the CUDA driver/toolkit, which it has.
  ldd "$b" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libcuda.so*) ;;
      libcudart*|libcublas*|libnccl*|libnvrtc*|libnvJitLink*) ;;
      *) cp -nL "$lib" "$stage/lib/" ;;
    esac
  done
done
cat > "$stage/run_gpu_tests.sh" <<'RUN'
#!/usr/bin/env bash
# Runs Ember's GPU tests (and GPU benchmarks, if packed) on this machine.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export OMP_WAIT_POLICY=passive
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
status=0
"$here/bin/ember_gpu_tests" --gtest_color=no || status=1
for bench in "$here"/bench/*; do
  [[ -x "$bench" ]] && "$bench" --benchmark_counters_tabular=true
done
exit $status
RUN
chmod +x "$stage/run_gpu_tests.sh"
mkdir -p .device
tar -cJf .device/ember-device.tar.xz -C "$(dirname "$stage")" ember-device
ls -l .device/ember-device.tar.xz
echo "carry .device and run: tar -xJf .device/ember-device.tar.xz -C /tmp && /tmp/ember-device/run_gpu_tests.sh"
