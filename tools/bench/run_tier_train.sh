#!/usr/bin/env bash
# `ember train` with the embedding table in memory and at memory budgets of
# 50%, 25%, 10% and 6% of it (issue 38): DLRM, dim 32, batch 2048, on
# generated Zipf data (600k examples, vocabulary 2M: ~3M rows, ~1 GiB in
# memory), one epoch, first steps included. Rounds alternate the cases, so
# that each budget's samples/s is a ratio against the in-memory run of the
# same round (these machines are noisy); prints every run, then the median
# ratio per budget with the disk tier's reads and writes per example.
#   tools/bench/run_tier_train.sh [ember binary] [extra train flags...]
# Environment: ROUNDS (default 2), THREADS (default 2), BUDGETS (percent,
# default "50 25 10 6"), ROWS (default 600000), BENCH_DIR (default /tmp),
# BUDGET_FLAGS (train flags for the budgeted runs only, e.g.
# "--embedding_weights=bf16": the same bytes of budget, measured against the
# default in-memory run).
set -euo pipefail
cd "$(dirname "$0")/../.."
ember=${1:-build/tools/ember}
shift || true
rounds=${ROUNDS:-2}
threads=${THREADS:-2}
budgets=${BUDGETS:-50 25 10 6}
rows=${ROWS:-600000}
work=$(mktemp -d "${BENCH_DIR:-/tmp}/ember-tier-train.XXXXXX")
trap 'rm -rf "$work"' EXIT

data="$work/data.tsv"
"$ember" gen-data --rows="$rows" --vocabulary=2000000 --out="$data" >/dev/null
common=(train --train_data="$data" --model=dlrm --embedding_dim=32 --batch_size=2048
        --threads="$threads" --plan=off --epochs=1)

run() {  # run NAME [flags...]: one training run, its metrics in $work/NAME.json
  local name=$1
  shift
  rm -rf "$work/rows"
  echo "[run_tier_train] $name" >&2
  "$ember" "${common[@]}" --metrics_out="$work/$name.json" "$@" "${extra[@]}" \
    >"$work/$name.log" 2>&1 || { cat "$work/$name.log" >&2; exit 1; }
}

extra=("$@")
read -r -a budget_flags <<<"${BUDGET_FLAGS:-}"
memory_bytes=""
for round in $(seq 1 "$rounds"); do
  run "memory-$round"
  if [[ -z "$memory_bytes" ]]; then
    memory_bytes=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["train"]["embedding"]["memory_bytes"])' "$work/memory-1.json")
  fi
  for percent in $budgets; do
    run "budget$percent-$round" --embedding_memory_budget=$((memory_bytes * percent / 100)) \
      --embedding_dir="$work/rows" "${budget_flags[@]}"
  done
done

python3 - "$work" "$rounds" "$budgets" <<'EOF'
import json, statistics, sys
work, rounds, budgets = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
def train(name):
    return json.load(open(f"{work}/{name}.json"))["train"]
print(f"{'case':<12} {'round':>5} {'samples/s':>10} {'ratio':>6} {'reads/ex':>9} {'writes/ex':>10}")
summary = {}
for r in range(1, rounds + 1):
    memory = train(f"memory-{r}")
    print(f"{'memory':<12} {r:>5} {memory['samples_per_sec']:>10.0f} {1:>6.2f}")
    for p in budgets:
        t = train(f"budget{p}-{r}")
        e, n = t["embedding"], t["examples"]
        ratio = t["samples_per_sec"] / memory["samples_per_sec"]
        reads, writes = e["disk_reads"] / n, e["disk_writes"] / n
        summary.setdefault(p, []).append((ratio, reads, writes))
        print(f"{'budget ' + p + '%':<12} {r:>5} {t['samples_per_sec']:>10.0f} {ratio:>6.2f} "
              f"{reads:>9.2f} {writes:>10.2f}")
print("median ratio to all in memory (same round), disk rows per trained example:")
for p, runs in summary.items():
    print(f"  budget {p:>2}%: {statistics.median(x[0] for x in runs):.2f}"
          f"  reads {statistics.median(x[1] for x in runs):.2f}"
          f"  writes {statistics.median(x[2] for x in runs):.2f}")
EOF
