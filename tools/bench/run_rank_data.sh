#!/bin/bash
# Memory per rank of data in memory (issue 62): the peak RSS of each rank of
# N ranks (one thread each) training on the same generated file, each rank
# holding its share of the examples (the default) or every example
# (--shard_in_memory_data=false), against one rank holding them all. The
# embedding rows divide over the ranks either way; the difference between the
# two N-rank runs is the examples'. The peak covers the load and the first
# epoch's swap (training stops after MAX_STEPS steps).
#
# Usage: tools/bench/run_rank_data.sh [build dir]   (ROWS=1000000, RANKS="2 4",
#   BATCH=1024 global, MAX_STEPS=40)
set -euo pipefail
build=${1:-build}
ember=$(realpath "$build/tools/ember")
rows=${ROWS:-1000000}
batch=${BATCH:-1024}
mpirun=(mpirun --allow-run-as-root --oversubscribe)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$ember" gen-data --rows="$rows" --out=data.tsv >/dev/null 2>&1
echo "data: $rows examples, $(du -m data.tsv | cut -f1) MiB of TSV"
# Runs a command and prints its peak RSS in MiB (the largest child's).
peak=(python3 -c 'import resource, subprocess, sys
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, rc)')
common=(--train_data=data.tsv --plan=off --threads=1 --max_steps="${MAX_STEPS:-40}")
read -r one rc < <("${peak[@]}" "$ember" train "${common[@]}" --batch_size="$batch")
((rc == 0)) || { echo "one rank failed (exit $rc)"; exit 1; }
echo "1 rank: peak RSS $one MiB"
for n in ${RANKS:-2 4}; do
  for shard in true false; do
    out=$(timeout 900 "${mpirun[@]}" -np "$n" "${peak[@]}" "$ember" train "${common[@]}" \
        --batch_size=$((batch / n)) --shard_in_memory_data="$shard")
    worst=$(awk '{ if ($2 != 0) bad = 1; if ($1 > m) m = $1 } END { print (bad ? -1 : m) }' <<<"$out")
    ((worst >= 0)) || { echo "$n ranks (--shard_in_memory_data=$shard) failed: $out"; exit 1; }
    python3 -c "print(f'$n ranks, --shard_in_memory_data=$shard: largest rank peak RSS $worst MiB,' \
                      f' {$worst / $one:.3f} of 1 rank')"
  done
done
