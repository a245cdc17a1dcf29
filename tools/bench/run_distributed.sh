#!/bin/bash
# Two ranks training one model (mpirun -np 2, one thread each) against one
# rank with both threads, on the same data and global batch, alternating
# pairs (this machine is noisy: only ratios within a run mean something);
# the bytes each rank exchanged a step against the least possible; and the
# MPI loopback limit measured in the same run (tools/bench/mpi_loopback.cc).
# Then the planner against measurement: 1, 2 and 3 ranks of one thread each
# (RANK_BATCH examples a rank and step), each rank's measured job samples/s
# beside what `ember plan --ranks=N` predicts for the same flags (goal: within
# +-20%), with the exchange's predicted share of the step.
#
# Usage: tools/bench/run_distributed.sh [build dir]
#   (PAIRS, ROWS, BATCH, MODEL; RANKS="1 2 3" and RANK_BATCH=1024 for the
#   prediction check, RANKS= to skip it; PAIRS=0 to skip the pairs)
set -euo pipefail
build=${1:-build}
ember=$(realpath "$build/tools/ember")
loopback=$(realpath "$build/tools/bench/mpi_loopback")
pairs=${PAIRS:-3}
rows=${ROWS:-300000}
batch=${BATCH:-2048}
model=${MODEL:-dlrm}
mpirun=(mpirun --allow-run-as-root --oversubscribe)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$ember" gen-data --rows="$rows" --out=data.tsv >/dev/null 2>&1
common=(--train_data=data.tsv --model="$model" --plan=off --epochs=1 --timing_warmup_steps=5)
steady() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['train']['steady_samples_per_sec'])" "$1"; }
ratios=()
for ((i = 0; i < pairs; ++i)); do
  "$ember" train "${common[@]}" --threads=2 --batch_size="$batch" --metrics_out=one.json \
      >one.log 2>&1
  "${mpirun[@]}" -np 2 "$ember" train "${common[@]}" --threads=1 --batch_size=$((batch / 2)) \
      --metrics_out=two.json >two.log 2>&1
  one=$(steady one.json)
  two=$(steady two.json)
  ratio=$(python3 -c "print(f'{$two / $one:.3f}')")
  ratios+=("$ratio")
  echo "pair $i: 1 rank x 2 threads $one samples/s, 2 ranks x 1 thread $two samples/s, ratio $ratio"
done
if ((pairs > 0)); then
python3 - "${ratios[@]}" <<'PY'
import math, sys
r = [float(x) for x in sys.argv[1:]]
print(f"2 ranks / 1 rank, geometric mean of {len(r)} pairs: {math.exp(sum(map(math.log, r)) / len(r)):.3f}")
PY
python3 - two.json <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["train"]
e, steps = t["embedding"], t["steps"]
print(f"rank 0 exchanged {e['exchanged_bytes'] / steps:.0f} bytes a step, the least possible "
      f"{e['exchanged_bytes_minimum'] / steps:.0f} ({e['exchanged_bytes'] / max(1, e['exchanged_bytes_minimum']):.3f}x)")
PY
grep -o "stages: .*" two.log | head -1
exchange=$(python3 -c "import json; t=json.load(open('two.json'))['train']; print(int(t['embedding']['exchanged_bytes'] / t['steps'] / 3))")
echo "MPI loopback: $("${mpirun[@]}" -np 2 "$loopback" --exchange_bytes="$exchange" --allreduce_floats=550000)"
fi

# Predicted against measured, for ranks of one thread each. The knobs are
# fixed on both sides, so that the plan costs the configuration that runs.
rank_batch=${RANK_BATCH:-1024}
knobs=(--threads=1 --pipeline=on --pipeline_depth=4 --early_pulls=true --batch_size="$rank_batch")
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))$2)" "$1"; }
for ranks in ${RANKS-1 2 3}; do
  "$ember" plan --train_data=data.tsv --model="$model" --epochs=1 "${knobs[@]}" --ranks="$ranks" \
      --dot_out= --plan_out="plan$ranks.json" >"plan$ranks.log" 2>&1
  launch=()
  ((ranks > 1)) && launch=("${mpirun[@]}" -np "$ranks")
  "${launch[@]}" "$ember" train "${common[@]}" "${knobs[@]}" --metrics_out="ranks$ranks.json" \
      >"ranks$ranks.log" 2>&1
  predicted=$(field "plan$ranks.json" "['predicted_samples_per_sec']")
  measured=$(steady "ranks$ranks.json")
  share=$(python3 -c "import json; print(json.load(open('plan$ranks.json')).get('exchange_share', 0))")
  python3 - "$ranks" "$predicted" "$measured" "$share" <<'PY'
import sys
n, p, m, share = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
err = (p - m) / m * 100 if m > 0 else float("nan")
print(f"{n} rank(s) x 1 thread: predicted {p:.0f} samples/s, measured {m:.0f} samples/s "
      f"({err:+.1f}%, {'within' if abs(err) <= 20 else 'outside'} +-20%); exchange "
      f"{100 * share:.1f}% of the step (predicted)")
PY
done
