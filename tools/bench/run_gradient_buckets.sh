#!/bin/bash
# The dense gradients' all-reduce in buckets during the backward
# (pipeline/gradient_buckets.h) against one all-reduce after it, for N ranks
# of one thread each over shared memory and over TCP (--mca btl tcp,self), on
# a model whose dense half is large enough for the all-reduce to show (DLRM,
# top MLP 1024-512-256, about 1.1M parameters), in alternating pairs; each
# N-rank job's steady samples/s against one rank of one thread with the same
# global batch in the same run. One run; only ratios within it mean something.
#
# Usage: tools/bench/run_gradient_buckets.sh [build dir]   (RANKS="2 4",
#   PAIRS=2, ROWS=60000, BATCH=1024 global, BUCKET_KIB=1024, TRANSPORTS="sm tcp")
set -euo pipefail
build=${1:-build}
ember=$(realpath "$build/tools/ember")
rows=${ROWS:-60000}
batch=${BATCH:-1024}
mpirun=(mpirun --allow-run-as-root --oversubscribe)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$ember" gen-data --rows="$rows" --out=data.tsv >/dev/null 2>&1
common=(--train_data=data.tsv --model=dlrm --top_mlp=1024,512,256 --plan=off --threads=1
        --epochs=1 --timing_warmup_steps=3)
steady() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['train']['steady_samples_per_sec'])" "$1"; }
"$ember" train "${common[@]}" --batch_size="$batch" --metrics_out=one.json >one.log 2>&1
one=$(steady one.json)
python3 -c "print(f'1 rank x 1 thread: {$one:.0f} samples/s')"
for transport in ${TRANSPORTS:-sm tcp}; do
  btl=()
  [[ "$transport" == tcp ]] && btl=(--mca pml ob1 --mca btl tcp,self)
  for n in ${RANKS:-2 4}; do
    for ((i = 0; i < ${PAIRS:-2}; ++i)); do
      for kib in 0 "${BUCKET_KIB:-1024}"; do
        timeout 900 "${mpirun[@]}" "${btl[@]}" -np "$n" "$ember" train "${common[@]}" \
            --batch_size=$((batch / n)) --dense_bucket_kib="$kib" --metrics_out="m$kib.json" \
            >"r$kib.log" 2>&1 || { echo "$n ranks, buckets $kib KiB failed"; tail -5 "r$kib.log"; exit 1; }
      done
      after=$(steady m0.json)
      during=$(steady "m${BUCKET_KIB:-1024}.json")
      python3 -c "print(f'$transport, $n ranks, pair $i: one all-reduce after the backward {$after:.0f} samples/s ({$after / $one:.3f} of 1 rank), buckets during it {$during:.0f} ({$during / $one:.3f}); buckets / after {$during / $after:.3f}')"
    done
    grep -o "dense gradients: .*" "r${BUCKET_KIB:-1024}.log" | head -1
  done
done
