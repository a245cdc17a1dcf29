#!/bin/bash
# Pipeline parallelism (issue 32): a deep dense model (DCN-v2, 6 cross
# layers, a 1024-1024-512 MLP) trained by 2 ranks of one thread each, its
# dense graph split into chunks over them (1F1B with v = 1, interleaved 1F1B
# with v = 2; rank 0 also reads the data and holds the table), against 1
# rank with both threads and no split, on the same data and batch;
# alternating triples (this machine is noisy: only ratios within a run mean
# something). All three train the same model up to the micro-batches' sums.
#
# Usage: tools/bench/run_pipeline_parallel.sh [build dir]
#   (TRIPLES=3, ROWS=60000, BATCH=2048, MICRO_BATCHES=8)
set -euo pipefail
build=${1:-build}
ember=$(realpath "$build/tools/ember")
triples=${TRIPLES:-3}
rows=${ROWS:-60000}
batch=${BATCH:-2048}
m=${MICRO_BATCHES:-8}
mpirun=(mpirun --allow-run-as-root --oversubscribe)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
echo "generating $rows rows..."
"$ember" gen-data --rows="$rows" --out=data.tsv >/dev/null 2>&1
common=(--train_data=data.tsv --model=dcn_v2 --cross_layers=6 --top_mlp=1024,1024,512 --plan=off
        --epochs=1 --timing_warmup_steps=3 --batch_size="$batch")
steady() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['train']['steady_samples_per_sec'])" "$1"; }
one_f=() inter=()
for ((i = 0; i < triples; ++i)); do
  "$ember" train "${common[@]}" --threads=2 --metrics_out=one.json >one.log 2>&1
  "${mpirun[@]}" -np 2 "$ember" train "${common[@]}" --threads=1 --pipeline_parallel=2 \
      --micro_batches="$m" --metrics_out=p1.json >p1.log 2>&1
  "${mpirun[@]}" -np 2 "$ember" train "${common[@]}" --threads=1 --pipeline_parallel=2 \
      --virtual_stages=2 --micro_batches="$m" --metrics_out=p2.json >p2.log 2>&1
  one=$(steady one.json) p1=$(steady p1.json) p2=$(steady p2.json)
  one_f+=("$(python3 -c "print($p1 / $one)")")
  inter+=("$(python3 -c "print($p2 / $one)")")
  echo "triple $i: 1 rank x 2 threads $one samples/s; 2 ranks x 1 thread: 1f1b (v=1, m=$m) $p1," \
       "interleaved (v=2, m=$m) $p2"
done
grep -A4 "pipeline: 2 ranks, 2 chunks" p2.log | sed 's/^.*\] //'
python3 - "${one_f[*]}" "${inter[*]}" <<'PY'
import math, sys
def gm(s):
    r = [float(x) for x in s.split()]
    return math.exp(sum(map(math.log, r)) / len(r)), len(r)
a, n = gm(sys.argv[1])
b, _ = gm(sys.argv[2])
print(f"2 pipelined ranks / 1 rank, geometric mean of {n}: 1f1b {a:.3f}, interleaved {b:.3f}")
PY
