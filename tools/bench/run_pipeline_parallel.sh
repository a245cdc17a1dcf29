#!/bin/bash
# Pipeline parallelism (issues 32, 61): a deep dense model (DCN-v2, 6 cross
# layers, a 1024-1024-512 MLP) trained by 2 ranks of one thread each, its
# dense graph split into chunks over them (1F1B with v = 1, interleaved 1F1B
# with v = 2, ZB-H1 with v = 1; rank 0 also reads the data and holds the
# table), against 1 rank with both threads and no split, on the same data and
# batch; alternating runs (this machine is noisy: only ratios within a run
# mean something). All train the same model up to the micro-batches' sums.
# Each kind's measured bubble (every rank's idle time in its schedules over
# its busy time, summed over the ranks: the ranks' "measured bubble" log
# lines) is printed beside its formula for equal chunks: (p-1)/(v*m) for
# 1F1B and interleaved, (p-1)/(3m) for ZB-H1 (equal F, B and W).
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
# Sum over the ranks' log lines of a run: "busy B s of T s" -> (T - B, B).
bubble() {
  sed -n 's/.*measured bubble .* (busy \([0-9.e+-]*\) s of \([0-9.e+-]*\) s).*/\1 \2/p' "$1" |
    python3 -c "import sys
b = t = 0.0
for line in sys.stdin:
    x, y = map(float, line.split()); b += x; t += y
print(f'{(t - b) / b:.4f}' if b > 0 else 'nan')"
}
declare -A ratio bubbles
kinds=("1f1b --pipeline_schedule=1f1b" "interleaved --virtual_stages=2"
       "zb-h1 --pipeline_schedule=zb-h1")
for ((i = 0; i < triples; ++i)); do
  "$ember" train "${common[@]}" --threads=2 --metrics_out=one.json >one.log 2>&1
  one=$(steady one.json)
  line="run $i: 1 rank x 2 threads $one samples/s; 2 ranks x 1 thread (m=$m):"
  for kind in "${kinds[@]}"; do
    name=${kind%% *} flags=${kind#* }
    # shellcheck disable=SC2086
    "${mpirun[@]}" -np 2 "$ember" train "${common[@]}" --threads=1 --pipeline_parallel=2 \
        --micro_batches="$m" $flags --metrics_out="$name.json" >"$name.log" 2>&1
    got=$(steady "$name.json")
    ratio[$name]+="$(python3 -c "print($got / $one)") "
    bubbles[$name]+="$(bubble "$name.log") "
    line+=" $name $got"
  done
  echo "$line samples/s"
done
grep -A4 "pipeline: 2 ranks, 2 chunks" interleaved.log | sed 's/^.*\] //'
for kind in "${kinds[@]}"; do
  name=${kind%% *}
  python3 - "$name" "${ratio[$name]}" "${bubbles[$name]}" "$m" <<'PY'
import math, sys
name, ratios, bubbles, m = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), int(sys.argv[4])
r = [float(x) for x in ratios]
gm = math.exp(sum(map(math.log, r)) / len(r))
p, v = 2, 2 if name == "interleaved" else 1
formula = (p - 1) / (3 * m) if name == "zb-h1" else (p - 1) / (v * m)
print(f"{name}: 2 pipelined ranks / 1 rank, geometric mean of {len(r)}: {gm:.3f}; "
      f"measured bubble {' '.join(bubbles)} (formula for equal chunks {formula:.4f})")
PY
done
