#!/usr/bin/env bash
# Packs what scripts/gpu_check.sh needs on a GPU machine that has CUDA (driver,
# runtime, cuBLAS, NCCL: in toolkit folders or Python wheels) but none of
# Ember's Debian libraries, into one .tar.xz well under 64 MiB:
#   ember-device/gpu_check.sh       scripts/gpu_check.sh
#   ember-device/bin/               ember, ember_gpu_tests, ember_nccl_tests,
#                                   dense_cuda_bench (stripped)
#   ember-device/lib/               every shared library they need but the C
#                                   runtime's, libcuda and the CUDA runtime/
#                                   cuBLAS/NCCL; lib/DEVICE_LIBS names those;
#                                   lib/compat/: libstdc++ and libgcc_s, for a
#                                   device whose own are older
#   ember-device/tools/bench/       torch_gpu_dlrm.py, torch_ctr.py and what
#                                   it imports
#   ember-device/MANIFEST           sha256, size and path of every other file
#
# Usage: scripts/pack_for_device.sh [--no-build] [--out DIR]
#   Builds the four targets with CUDA for sm_90 (the H100) in
#   $EMBER_BUILD_DIR (default build-device), then packs them into
#   DIR/ember-device.tar.xz (default DIR: .device, git-ignored).
#   --no-build packs the binaries already in $EMBER_BUILD_DIR as they are.
#   EMBER_PACK_XZ_LEVEL (default 6) trades size for time (0: ~5x faster).
# It ends by printing the command to run on the device.
set -euo pipefail
cd "$(dirname "$0")/.."
build=1
out_dir=.device
while (( $# )); do
  case "$1" in
    --no-build) build=0 ;;
    --out) out_dir="$2"; shift ;;
    *) echo "usage: $0 [--no-build] [--out DIR]" >&2; exit 1 ;;
  esac
  shift
done
build_dir="${EMBER_BUILD_DIR:-build-device}"
targets=(ember ember_gpu_tests ember_nccl_tests dense_cuda_bench)
if (( build )); then
  launcher=()
  command -v ccache > /dev/null &&
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 "${launcher[@]}"
  cmake --build "$build_dir" -j "${EMBER_JOBS:-$(nproc)}" --target "${targets[@]}"
fi
binaries=("$build_dir/tools/ember" "$build_dir/tests/gpu/ember_gpu_tests"
          "$build_dir/tests/gpu/ember_nccl_tests" "$build_dir/tools/bench/dense_cuda_bench")
for b in "${binaries[@]}"; do
  [[ -x "$b" ]] || { echo "pack_for_device: $b is missing (build it, or drop --no-build)" >&2; exit 1; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
stage="$tmp/ember-device"
mkdir -p "$stage/bin" "$stage/lib/compat" "$stage/tools/bench"
device_libs=()
for b in "${binaries[@]}"; do
  cp "$b" "$stage/bin/"
  strip --strip-unneeded "$stage/bin/$(basename "$b")"
  while read -r name path; do
    case "$name" in
      # The C runtime and loader: the device's own (it must be glibc >= ours).
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|linux-vdso*) ;;
      # Found on the device by gpu_check.sh (toolkit, Python wheels, ldconfig).
      libcuda.so*) ;;
      libcudart*|libcublas*|libnccl*|libnvrtc*|libnvJitLink*) device_libs+=("$name") ;;
      # Newer than some devices' own, but needing glibc 2.36: used there only
      # where the device's libstdc++ is too old (gpu_check.sh decides).
      libstdc++.so*|libgcc_s.so*) [[ -f "$stage/lib/compat/$name" ]] || cp -L "$path" "$stage/lib/compat/$name" ;;
      *) [[ -f "$stage/lib/$name" ]] || { cp -L "$path" "$stage/lib/$name"; strip --strip-unneeded "$stage/lib/$name"; } ;;
    esac
  done < <(ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
done
printf '%s\n' "${device_libs[@]}" | sort -u > "$stage/lib/DEVICE_LIBS"
cp scripts/gpu_check.sh "$stage/gpu_check.sh"
cp tools/bench/torch_gpu_dlrm.py tools/bench/torch_ctr.py tools/bench/bench_data.py \
   tools/bench/ember_random.py "$stage/tools/bench/"
(cd "$stage" && find . -type f ! -name MANIFEST | sed 's|^\./||' | LC_ALL=C sort |
   while read -r f; do echo "$(sha256sum < "$f" | cut -d' ' -f1) $(stat -c %s "$f") $f"; done > MANIFEST)

mkdir -p "$out_dir"
archive="$out_dir/ember-device.tar.xz"
tar -C "$tmp" -cf - ember-device | xz -T0 "-${EMBER_PACK_XZ_LEVEL:-6}" > "$archive.part"
mv "$archive.part" "$archive"
size=$(stat -c %s "$archive")
glibc_needed() {  # the newest glibc symbol version that FILES need
  for f in "$@"; do objdump -T "$f" 2>/dev/null; done | grep -o 'GLIBC_2\.[0-9]*' | sort -t. -k2 -n -u | tail -1
}
glibc=$(glibc_needed "$stage"/bin/* "$stage"/lib/*.so*)
glibc_compat=$(glibc_needed "$stage"/lib/compat/*)
echo "packed $(wc -l < "$stage/MANIFEST") files ($(du -sh "$stage" | cut -f1) unpacked) into $archive: $(( size / 1024 )) KiB"
echo "needs on the device: $(tr '\n' ' ' < "$stage/lib/DEVICE_LIBS")libcuda, glibc >= ${glibc#GLIBC_} (>= ${glibc_compat#GLIBC_} where lib/compat's libstdc++ is needed)"
(( size < 48 * 1024 * 1024 )) || echo "WARNING: $archive is over 48 MiB; the device accepts 64 MiB in all" >&2
cat <<EOF
On the device (repository root; carry: $out_dir; timeout_s: 330 — gpu_check.sh
stops itself by 300 s, so two runs and a ~3 minute start fit in 15 minutes):
  tar -xJf $archive -C /tmp && /tmp/ember-device/gpu_check.sh "\$OUT/gpu_check"
EOF
