#!/usr/bin/env bash
# The device pack without a device: packs the already built binaries of
# BUILD_DIR (scripts/pack_for_device.sh --no-build, fast xz), unpacks them
# into an empty directory and runs gpu_check.sh there with LD_LIBRARY_PATH
# holding only the unpacked libraries and the CUDA toolkit's. Checks that
#   - the MANIFEST lists every file of the pack with its sha256 and size;
#   - ldd finds every library of every binary (libcuda, the driver's, aside);
#   - every GPU step is recorded as skipped with a reason (no GPU here);
#   - summary.md is written.
# Usage: tests/tools/pack_test.sh BUILD_DIR (exit 77: skipped, a build without CUDA)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
check() {  # check DESCRIPTION COMMAND...
  local what=$1; shift
  if "$@"; then echo "PASS: $what"; else echo "FAIL: $what"; failures=$(( failures + 1 )); fi
}

if [[ ! -x "$build/tests/gpu/ember_gpu_tests" || ! -x "$build/tools/bench/dense_cuda_bench" ]]; then
  echo "SKIP: $build was built without CUDA (no ember_gpu_tests or dense_cuda_bench)"
  exit 77
fi
EMBER_BUILD_DIR="$build" EMBER_PACK_XZ_LEVEL=0 "$root/scripts/pack_for_device.sh" --no-build \
  --out "$tmp/pack" > "$tmp/pack.log"
cat "$tmp/pack.log"
archive="$tmp/pack/ember-device.tar.xz"
size=$(stat -c %s "$archive")
echo "pack: $(( size / 1024 )) KiB (xz -0; scripts/pack_for_device.sh uses -6)"
check "the pack is under 64 MiB" test "$size" -lt $(( 64 * 1024 * 1024 ))
check "the pack prints the device command" grep -q 'gpu_check.sh "\$OUT/gpu_check"' "$tmp/pack.log"

mkdir "$tmp/device"
tar -xJf "$archive" -C "$tmp/device"
pack="$tmp/device/ember-device"
manifest_ok() {
  local listed actual
  listed=$(awk '{print $3}' "$pack/MANIFEST")
  actual=$(cd "$pack" && find . -type f ! -name MANIFEST | sed 's|^\./||' | LC_ALL=C sort)
  [[ "$listed" == "$actual" ]] || { echo "  MANIFEST lists other files than the pack holds"; return 1; }
  (cd "$pack" && while read -r sum size path; do
     [[ "$(sha256sum < "$path" | cut -d' ' -f1)" == "$sum" && "$(stat -c %s "$path")" == "$size" ]] ||
       { echo "  $path differs from its MANIFEST line"; exit 1; }
   done < MANIFEST)
}
check "the MANIFEST matches every file (sha256, size)" manifest_ok
for b in ember ember_gpu_tests ember_nccl_tests dense_cuda_bench; do
  check "bin/$b is packed" test -x "$pack/bin/$b"
done
check "tools/bench/torch_gpu_dlrm.py is packed" test -f "$pack/tools/bench/torch_gpu_dlrm.py"

libs="$pack/lib:$pack/lib/compat:/usr/local/cuda/lib64"
for b in "$pack"/bin/*; do
  missing=$(env -i LD_LIBRARY_PATH="$libs" PATH=/usr/bin:/bin ldd "$b" | awk '/not found/ {print $1}' |
            grep -v '^libcuda\.so' || true)
  check "ldd $(basename "$b"): nothing missing but libcuda${missing:+ (missing: $missing)}" test -z "$missing"
done

# An empty PATH directory hides any nvidia-smi; /dev/nvidia0 does not exist here.
results="$tmp/results"
(cd "$tmp/device" && env -i HOME="$tmp" PATH=/usr/bin:/bin LD_LIBRARY_PATH="$libs" \
   EMBER_PYTHON=/nonexistent "$pack/gpu_check.sh" "$results") > "$tmp/check.log" 2>&1 ||
  { cat "$tmp/check.log"; echo "FAIL: gpu_check.sh exited non-zero"; exit 1; }
cat "$tmp/check.log"
steps="$results/steps.tsv"
for s in manifest libraries load; do
  check "step $s is ok" grep -qP "^$s\tok\t" "$steps"
done
if [[ -e /dev/nvidia0 ]]; then
  echo "SKIP: this machine has a GPU; the skipped-step checks need one without"
else
  for s in a_device b_gpu_tests b_nccl_tests c_smoke d_dense_cuda_bench e_hetero e_torch_gpu; do
    check "step $s is skipped with its reason" grep -qP "^$s\tskipped\t0\tno GPU: .+" "$steps"
  done
fi
check "summary.md is written" grep -q '^# Ember GPU check' "$results/summary.md"
check "summary.md lists the libraries used" grep -q 'libcudart.so.13 /' "$results/summary.md"
(( failures == 0 )) || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
