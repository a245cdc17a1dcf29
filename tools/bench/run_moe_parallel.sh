#!/bin/bash
# Expert parallelism (issue 33): --model=moe trained by 2 ranks of one thread
# each, the experts divided among them (the rows routed to an expert go to
# its rank and back), against 2 ranks that each compute every expert for
# their own rows (--expert_parallel=false), and against 1 rank with both
# threads, on the same data and global batch; alternating triples (this
# machine is noisy: only ratios within a run mean something). Then, from
# the last expert-parallel run: the bytes rank 0's expert layers sent a step
# and the seconds they spent exchanging, beside what `ember plan --ranks=2`
# predicts for the same flags (its formula: routed rows owned elsewhere x
# (in + out) floats x 4 bytes x 2, forward and backward; scheduler/
# cost_model.h RankExchangeBytes::experts).
#
# Usage: tools/bench/run_moe_parallel.sh [build dir]
#   (TRIPLES=3, ROWS=200000, BATCH=2048 global, EXPERTS=4, EXPERT_MLP=256,128)
set -euo pipefail
build=${1:-build}
ember=$(realpath "$build/tools/ember")
triples=${TRIPLES:-3}
rows=${ROWS:-200000}
batch=${BATCH:-2048}
mpirun=(mpirun --allow-run-as-root --oversubscribe)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
echo "generating $rows rows..."
"$ember" gen-data --rows="$rows" --out=data.tsv >/dev/null 2>&1
model=(--model=moe --num_experts="${EXPERTS:-4}" --moe_expert_mlp="${EXPERT_MLP:-256,128}")
common=(--train_data=data.tsv "${model[@]}" --plan=off --epochs=1 --timing_warmup_steps=5)
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))$2)" "$1"; }
steady() { field "$1" "['train']['steady_samples_per_sec']"; }
divided=() replicated=()
for ((i = 0; i < triples; ++i)); do
  "$ember" train "${common[@]}" --threads=2 --batch_size="$batch" --metrics_out=one.json \
      >one.log 2>&1
  "${mpirun[@]}" -np 2 "$ember" train "${common[@]}" --threads=1 --batch_size=$((batch / 2)) \
      --metrics_out=ep.json >ep.log 2>&1
  "${mpirun[@]}" -np 2 "$ember" train "${common[@]}" --threads=1 --batch_size=$((batch / 2)) \
      --expert_parallel=false --metrics_out=dp.json >dp.log 2>&1
  one=$(steady one.json) ep=$(steady ep.json) dp=$(steady dp.json)
  divided+=("$(python3 -c "print($ep / $one)")")
  replicated+=("$(python3 -c "print($dp / $one)")")
  echo "triple $i: 1 rank x 2 threads $one samples/s; 2 ranks x 1 thread: experts divided $ep," \
       "every expert on each rank $dp"
done
python3 - "${divided[*]}" "${replicated[*]}" <<'PY'
import math, sys
def gm(s):
    r = [float(x) for x in s.split()]
    return math.exp(sum(map(math.log, r)) / len(r)), len(r)
d, n = gm(sys.argv[1])
r, _ = gm(sys.argv[2])
print(f"2 ranks / 1 rank, geometric mean of {n}: experts divided {d:.3f}, every expert on each "
      f"rank {r:.3f}")
PY

# Measured against the planner, for the flags of the expert-parallel runs.
"$ember" plan --train_data=data.tsv "${model[@]}" --epochs=1 --threads=1 \
    --batch_size=$((batch / 2)) --ranks=2 --dot_out= --plan_out=plan.json >plan.log 2>&1
python3 - ep.json plan.json <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["train"]
plan = json.load(open(sys.argv[2]))
m, steps = t["moe"], t["steps"]
sent, seconds = m["exchanged_bytes"] / steps, m["exchange_seconds"] / steps
want, want_s = plan["expert_exchange_bytes_per_step"], plan["expert_exchange_seconds_per_step"]
print(f"rank 0's expert layers sent {sent:.0f} bytes a step; formula (ember plan) {want:.0f} "
      f"({sent / want:.3f}x)")
print(f"their exchanges took {1e3 * seconds:.3f} ms a step (waits for the other rank included); "
      f"ember plan predicts {1e3 * want_s:.3f} ms ({(want_s - seconds) / seconds * 100:+.1f}%)")
print(f"dropped: {m['dropped_examples_per_step']:.1f} examples a step lost a choice")
PY
