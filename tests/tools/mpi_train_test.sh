#!/bin/bash
# `mpirun -np N ember train` trains one model (issue 31), checked from the
# command line as a user runs it:
#
#   equal N     N ranks with --batch_size=B and one thread each train the model
#               (same --model_hash, same test AUC) that one rank trains with
#               --batch_size=N*B in N row ranges (--dense_row_shards=N; N
#               threads give the same bits): pipelined, sequential, and with
#               a disk tier on every rank.
#   flags       ranks started with different flags are refused at start,
#               naming the flag.
#   busy        a pipeline's rank 0 busy for longer than the rank timeout
#               (reading its data, evaluating, checkpointing) while the
#               stages wait: its heartbeat keeps them waiting; the job ends
#               well.
#   lost HOW RANK [FLAGS...]
#               rank RANK of 3 stopped (HOW=stop, SIGSTOP) or killed (kill,
#               SIGKILL, under mpirun --enable-recovery, which leaves the job
#               to Ember instead of ending it itself) mid-run: the job ends
#               within 60 s with Ember's own message from another rank naming
#               it ("ember train (rank 0 of 3): ... rank 1 ..."), and no
#               process is left. FLAGS: the role, added to the job's (a
#               pipeline's, an expert model's). The job's ranks are found by
#               their session (the launcher is started with setsid) and their
#               OMPI_COMM_WORLD_RANK, never by command line, so that jobs of
#               other tests running at once are never taken for them.
#   resume [FLAGS...]
#               2 ranks stopped at a checkpoint resume to the model of an
#               uninterrupted run (same hash); the checkpoint resumes on 1
#               and on 3 ranks (resharded) with the same model hash (every
#               row, its vector and optimizer state, and the dense state),
#               3 ranks train on, their checkpoint resumes on 2 with their
#               hash, and on 1, which trains on. FLAGS: added to the
#               job's (a disk tier under a budget smaller than a shard;
#               --reader=stream: files streamed in shards, and the examples
#               of an epoch resumed from 2 ranks on 3 counted).
#   pipeline N  --pipeline_parallel=N (issue 32): DCN-v2 split into 2 chunks a
#               rank over N ranks, interleaved 1F1B, trains the model one rank
#               trains with the same micro-batches: same --model_hash.
#   zero_bubble N  --pipeline_schedule=zb-h1 over N ranks (issue 61): the
#               backwards split into input and weight gradients train the
#               model 1F1B trains over N ranks: the same --model_hash; for
#               N = 2 also the one-rank model of the same micro-batches (over
#               3 ranks DCN-v2's chunks sum x0's gradient in another order
#               than one rank does, for 1F1B as for every kind).
#   lock        a second job on a --checkpoint_dir or --embedding_dir that a
#               running job writes is refused before its first step, exit 2,
#               naming the directory and the holder: one process and 2 ranks;
#               once the first job is killed (SIGKILL) the directory is free.
#   moe N       --model=moe with its experts divided among N ranks (issue 33)
#               trains the model one rank trains in N row ranges (the
#               routing's groups): same --model_hash; rows crossed between
#               ranks (the metrics' moe exchanged_bytes).
#   layout      --mesh (scheduler/layout.h, issue 58) says what the shorthands
#               say: data:2, pipeline:2 and expert:2 train the models of the
#               default 2 ranks, --pipeline_parallel=2 and the experts divided
#               (same --model_hash); the metrics, the job record and each
#               rank's trace hold the layout; a mesh that is not the world,
#               one of two axes above 1 and a table sharding the runtime does
#               not run are refused at start, naming the flag. A checkpoint of
#               one layout resumes under another (data:2 -> pipeline:2 and one
#               rank, pipeline:2 -> data:2 and 3 ranks, expert:2 -> data:2):
#               a resume that trains nothing has the saving job's hash (every
#               row and the dense state resharded), and it trains on.
#   accumulate N
#               N ranks of --batch_size=B in --micro_batches=2 (gradient
#               accumulation under data parallelism) train the model one rank
#               trains with --batch_size=N*B in 2N micro-batches (the same
#               rows in each micro-batch), up to the order of the sums: the
#               same test AUC and logloss, and the same scores within 1e-6.
#
# Usage: mpi_train_test.sh MPIEXEC EMBER equal N | flags | resume [FLAGS...] | pipeline N |
#        zero_bubble N | moe N | lock | busy | lost stop|kill RANK [FLAGS...] | layout |
#        accumulate N
set -u
mpiexec=$1
ember=$(realpath "$2")
mode=$3
work=$(mktemp -d)
trap '[[ -n "${KEEP_WORK:-}" ]] || rm -rf "$work"' EXIT
mpirun=("$mpiexec" --allow-run-as-root --oversubscribe)
# Generated data: every rank generates the same examples (seeded).
data=(--rows=6000 --plan=off --model_hash --bottom_mlp=64,16 --top_mlp=64,32)

hash_of() { sed -n 's/^model hash: //p' "$1"; }
auc_of() { sed -n 's/^test:  AUC \([0-9.]*\).*/\1/p' "$1"; }

case "$mode" in
equal)
  n=$4
  status=0
  # Each rank holds its share of the examples and the ranks swap them between
  # epochs (io/rank_shard_source.h), or every rank holds them all; the dense
  # gradients go in buckets of 1 MiB (one here), 4 KiB (one per parameter or
  # so) during the backward, or in one all-reduce after it.
  for extra in "--pipeline=on" "--pipeline=off --epochs=2 --dense_bucket_kib=4" \
               "--embedding_memory_budget=2MB --dense_bucket_kib=0" \
               "--shard_in_memory_data=false --epochs=2"; do
    dir="$work/${extra//[^a-z0-9]/_}"
    mkdir -p "$dir/one" "$dir/ranks"
    # One thread running N row ranges of 128 rows: the ranks' rows.
    (cd "$dir/one" && timeout 300 "$ember" train "${data[@]}" $extra --threads=1 \
        --dense_row_shards="$n" --batch_size=$((n * 128)) --embedding_dir="$dir/one/rows" \
        >out.txt 2>&1)
    one=$?
    (cd "$dir/ranks" && timeout 300 "${mpirun[@]}" -np "$n" "$ember" train "${data[@]}" $extra \
        --threads=1 --batch_size=128 --embedding_dir="$dir/ranks/rows" >out.txt 2>&1)
    ranks=$?
    echo "$extra: one rank exit $one, hash $(hash_of "$dir/one/out.txt"), AUC $(auc_of "$dir/one/out.txt");" \
         "$n ranks exit $ranks, hash $(hash_of "$dir/ranks/out.txt"), AUC $(auc_of "$dir/ranks/out.txt")"
    if ((one != 0 || ranks != 0)); then
      tail -n 20 "$dir/one/out.txt" "$dir/ranks/out.txt"
      status=1
      continue
    fi
    if [[ -z "$(hash_of "$dir/one/out.txt")" ||
          "$(hash_of "$dir/one/out.txt")" != "$(hash_of "$dir/ranks/out.txt")" ]]; then
      echo "FAIL ($extra): the model hashes differ"
      status=1
    fi
    if [[ "$(auc_of "$dir/one/out.txt")" != "$(auc_of "$dir/ranks/out.txt")" ]]; then
      echo "FAIL ($extra): the test AUCs differ"
      status=1
    fi
    # Small buckets: several of them, all-reduced during the backward.
    if [[ "$extra" == *--dense_bucket_kib=4* ]] &&
        ! grep -Eq "dense gradients: all-reduced in ([2-9]|[1-9][0-9]+) bucket" "$dir/ranks/out.txt"; then
      echo "FAIL ($extra): the gradients were not all-reduced in several buckets"
      status=1
    fi
    # Each rank held 1/n of the training examples (4800 of the 6000).
    shares=$(grep -c "holds $((4800 / n)) of the 4800 training examples" "$dir/ranks/out.txt")
    if [[ "$extra" == --shard_in_memory_data=false* ]]; then
      ((shares == 0)) || { echo "FAIL ($extra): a rank held a share"; status=1; }
    elif ((shares != n)); then
      echo "FAIL ($extra): $shares of $n ranks say they held 1/$n of the examples"
      status=1
    fi
    # Only rank 0 reports; every rank kept its rows in a directory of its own.
    if (($(grep -c '^test:' "$dir/ranks/out.txt") != 1)); then
      echo "FAIL ($extra): expected one summary, from rank 0"
      status=1
    fi
    if [[ "$extra" == --embedding_memory_budget* ]]; then
      for ((r = 0; r < n; ++r)); do
        [[ -d "$dir/ranks/rows/rank-$r" ]] || { echo "FAIL: no rows/rank-$r"; status=1; }
      done
    fi
  done
  # A columnar file, which each rank reads in chunks keeping its share.
  dir="$work/columnar"
  mkdir -p "$dir"
  cd "$dir" || exit 1
  "$ember" gen-data --rows=6000 --out=d.tsv >/dev/null 2>&1 &&
    "$ember" convert --input=d.tsv --output=d.col >/dev/null 2>&1 ||
    { echo "FAIL: gen-data or convert"; exit 1; }
  col=("${data[@]:1}" --train_data=d.col --threads=1 --epochs=2)
  timeout 300 "$ember" train "${col[@]}" --dense_row_shards="$n" --batch_size=$((n * 128)) \
      --export_dir=one.bundle >one.txt 2>&1
  timeout 300 "${mpirun[@]}" -np "$n" "$ember" train "${col[@]}" --batch_size=128 \
      --export_dir=ranks.bundle >ranks.txt 2>&1
  echo "columnar: one rank hash $(hash_of one.txt), $n ranks hash $(hash_of ranks.txt)"
  if [[ -z "$(hash_of one.txt)" || "$(hash_of one.txt)" != "$(hash_of ranks.txt)" ]]; then
    echo "FAIL (columnar): the model hashes differ"; tail -5 one.txt ranks.txt; status=1
  fi
  if (($(grep -c "holds $((4800 / n)) of the 4800 training examples" ranks.txt) != n)); then
    echo "FAIL (columnar): the ranks did not each hold 1/$n of the examples"; status=1
  fi
  # The ranks' bundle: each rank wrote its rows (n shards), and it scores the
  # one rank's bundle's bits.
  grep -q "\"shards\": $n" ranks.bundle/MANIFEST.json ||
    { echo "FAIL: the ranks' bundle is not of $n shards"; status=1; }
  "$ember" predict --bundle=one.bundle --data=d.col --predictions_out=one.scores >/dev/null 2>&1 &&
    "$ember" predict --bundle=ranks.bundle --data=d.col --predictions_out=ranks.scores \
        >/dev/null 2>&1 || { echo "FAIL: ember predict"; status=1; }
  if ! cmp -s one.scores ranks.scores || [[ ! -s one.scores ]]; then
    echo "FAIL: the ranks' sharded bundle scores differ from the one rank's bundle"; status=1
  fi
  exit $status
  ;;
flags)
  # Rank 1 runs with another --batch_size.
  cd "$work"
  timeout 120 "${mpirun[@]}" -np 2 bash -c \
    'exec "$0" train --rows=2000 --plan=off --batch_size=$((128 + OMPI_COMM_WORLD_RANK))' \
    "$ember" >out.txt 2>&1
  rc=$?
  cat out.txt | grep -v '^I[0-9]' | head -20
  if ((rc == 0 || rc == 124)); then echo "FAIL: exit $rc"; exit 1; fi
  grep -q "different flags: rank 1 has --batch_size=129, rank 0 --batch_size=128" out.txt ||
    { echo "FAIL: the error does not name the flag"; exit 1; }
  exit 0
  ;;
pipeline)
  n=$4
  cd "$work"
  job=("${data[@]}" --model=dcn_v2 --cross_layers=3 --threads=1 --batch_size=256
       --micro_batches=$((2 * n)))
  timeout 300 "$ember" train "${job[@]}" >one.txt 2>&1 ||
    { echo "FAIL: one rank exited $?"; tail -n 20 one.txt; exit 1; }
  timeout 300 "${mpirun[@]}" -np "$n" "$ember" train "${job[@]}" --pipeline_parallel="$n" \
      --virtual_stages=2 >ranks.txt 2>&1 ||
    { echo "FAIL: $n ranks exited $?"; grep -v '^I[0-9]' ranks.txt | tail -n 20; exit 1; }
  echo "pipeline: one rank hash $(hash_of one.txt), AUC $(auc_of one.txt);" \
       "$n ranks hash $(hash_of ranks.txt), AUC $(auc_of ranks.txt)"
  grep -h -A$((2 * n)) "pipeline: $n ranks" ranks.txt | sed 's/^.*\] //'
  [[ -n "$(hash_of one.txt)" && "$(hash_of one.txt)" == "$(hash_of ranks.txt)" ]] ||
    { echo "FAIL: the model hashes differ"; exit 1; }
  # Megatron's micro-batch groups: every micro-batch in one group (G = m),
  # and m = p (1F1B from the first step on the later ranks): the same model.
  timeout 300 "${mpirun[@]}" -np "$n" "$ember" train "${job[@]}" --pipeline_parallel="$n" \
      --virtual_stages=2 --pipeline_group=$((2 * n)) >group.txt 2>&1 ||
    { echo "FAIL: --pipeline_group exited $?"; grep -v '^I[0-9]' group.txt | tail -n 20; exit 1; }
  timeout 300 "$ember" train "${data[@]}" --model=dcn_v2 --cross_layers=3 --threads=1 \
      --batch_size=256 --micro_batches="$n" >one_p.txt 2>&1 || { echo "FAIL: one rank, m = p"; exit 1; }
  timeout 300 "${mpirun[@]}" -np "$n" "$ember" train "${data[@]}" --model=dcn_v2 --cross_layers=3 \
      --threads=1 --batch_size=256 --micro_batches="$n" --pipeline_parallel="$n" \
      --virtual_stages=2 >ranks_p.txt 2>&1 || { echo "FAIL: $n ranks, m = p"; exit 1; }
  echo "pipeline group G=$((2 * n)): hash $(hash_of group.txt); m = p: one rank $(hash_of one_p.txt)," \
       "$n ranks $(hash_of ranks_p.txt)"
  [[ "$(hash_of group.txt)" == "$(hash_of one.txt)" && -n "$(hash_of one_p.txt)" &&
     "$(hash_of one_p.txt)" == "$(hash_of ranks_p.txt)" ]] ||
    { echo "FAIL: the model hashes differ"; exit 1; }
  exit 0
  ;;
zero_bubble)
  n=$4
  cd "$work"
  job=("${data[@]}" --model=dcn_v2 --cross_layers=3 --threads=1 --batch_size=256
       --micro_batches=$((2 * n)))
  timeout 300 "$ember" train "${job[@]}" >one.txt 2>&1 ||
    { echo "FAIL: one rank exited $?"; tail -n 20 one.txt; exit 1; }
  for kind in 1f1b zb-h1; do
    timeout 300 "${mpirun[@]}" -np "$n" "$ember" train "${job[@]}" --pipeline_parallel="$n" \
        --pipeline_schedule=$kind >$kind.txt 2>&1 ||
      { echo "FAIL: $kind on $n ranks exited $?"; grep -v '^I[0-9]' $kind.txt | tail -n 20; exit 1; }
  done
  echo "zero bubble: one rank hash $(hash_of one.txt), AUC $(auc_of one.txt); $n ranks 1f1b" \
       "$(hash_of 1f1b.txt), zb-h1 $(hash_of zb-h1.txt), AUC $(auc_of zb-h1.txt)"
  grep -h "schedule zb-h1" zb-h1.txt | sed 's/^.*\] //' | head -n 1
  [[ -n "$(hash_of 1f1b.txt)" && "$(hash_of 1f1b.txt)" == "$(hash_of zb-h1.txt)" ]] ||
    { echo "FAIL: the model hashes of 1f1b and zb-h1 differ"; exit 1; }
  [[ "$n" != 2 || "$(hash_of one.txt)" == "$(hash_of zb-h1.txt)" ]] ||
    { echo "FAIL: the model hashes of one rank and zb-h1 differ"; exit 1; }
  [[ "$(auc_of one.txt)" == "$(auc_of zb-h1.txt)" ]] ||
    { echo "FAIL: the test AUCs of one rank and zb-h1 differ"; exit 1; }
  exit 0
  ;;
moe)
  n=$4
  cd "$work"
  moe=("${data[@]}" --model=moe --num_experts=4 --moe_expert_mlp=32,16 --threads=1)
  timeout 300 "$ember" train "${moe[@]}" --dense_row_shards="$n" --batch_size=$((n * 128)) \
      >one.txt 2>&1 || { echo "FAIL: one rank exited $?"; tail -n 20 one.txt; exit 1; }
  timeout 300 "${mpirun[@]}" -np "$n" "$ember" train "${moe[@]}" --batch_size=128 \
      --metrics_out=metrics.json >ranks.txt 2>&1 ||
    { echo "FAIL: $n ranks exited $?"; grep -v '^I[0-9]' ranks.txt | tail -n 20; exit 1; }
  echo "moe: one rank hash $(hash_of one.txt); $n ranks hash $(hash_of ranks.txt)"
  grep -h "moe:" ranks.txt | sed 's/^.*\] //'
  status=0
  [[ -n "$(hash_of one.txt)" && "$(hash_of one.txt)" == "$(hash_of ranks.txt)" ]] ||
    { echo "FAIL: the model hashes differ"; status=1; }
  grep -q "experts divided among the ranks" ranks.txt ||
    { echo "FAIL: the experts were not divided"; status=1; }
  python3 -c 'import json,sys; m=json.load(open("metrics.json"))["train"]["moe"]; sys.exit(m["exchanged_bytes"] <= 0)' ||
    { echo "FAIL: no exchanged bytes in metrics.json"; status=1; }
  exit $status
  ;;
accumulate)
  n=$4
  cd "$work"
  job=("${data[@]}" --threads=1)
  "$ember" gen-data --rows=400 --seed=11 --out=score.tsv >/dev/null 2>&1
  timeout 300 "$ember" train "${job[@]}" --batch_size=$((n * 128)) --micro_batches=$((2 * n)) \
      --export_dir=one >one.txt 2>&1 || { echo "FAIL: one rank exited $?"; tail -n 20 one.txt; exit 1; }
  timeout 300 "${mpirun[@]}" -np "$n" "$ember" train "${job[@]}" --batch_size=128 \
      --micro_batches=2 --export_dir=ranks >ranks.txt 2>&1 ||
    { echo "FAIL: $n ranks exited $?"; grep -v '^I[0-9]' ranks.txt | tail -n 20; exit 1; }
  for m in one ranks; do
    "$ember" predict --bundle=$m --data=score.tsv --predictions_out=$m.scores >/dev/null 2>&1 ||
      { echo "FAIL: predict with $m"; exit 1; }
  done
  loss_of() { sed -n 's/^test:  AUC [0-9.]*  logloss \([0-9.]*\).*/\1/p' "$1"; }
  echo "accumulate: one rank AUC $(auc_of one.txt) logloss $(loss_of one.txt);" \
       "$n ranks AUC $(auc_of ranks.txt) logloss $(loss_of ranks.txt)"
  status=0
  [[ -n "$(auc_of one.txt)" && "$(auc_of one.txt)" == "$(auc_of ranks.txt)" &&
     "$(loss_of one.txt)" == "$(loss_of ranks.txt)" ]] ||
    { echo "FAIL: the test metrics differ"; status=1; }
  python3 - <<'PY' || status=1
import sys
one = [float(x) for x in open("one.scores").read().split()]
ranks = [float(x) for x in open("ranks.scores").read().split()]
worst = max(abs(a - b) for a, b in zip(one, ranks))
print("scores: %d, largest difference %.2e" % (len(one), worst))
sys.exit(len(one) != len(ranks) or len(one) == 0 or worst > 1e-6)
PY
  exit $status
  ;;
layout)
  cd "$work"
  status=0
  short=("${data[@]}" --threads=1 --batch_size=128)
  same() {  # NAME FLAGS_A -- FLAGS_B: the two 2-rank jobs train one model.
    local name=$1 a=() b=()
    shift
    while [[ $1 != -- ]]; do a+=("$1"); shift; done
    shift
    b=("$@")
    timeout 300 "${mpirun[@]}" -np 2 "$ember" train "${short[@]}" "${a[@]}" >"$name.a.txt" 2>&1
    local ea=$?
    timeout 300 "${mpirun[@]}" -np 2 "$ember" train "${short[@]}" "${b[@]}" >"$name.b.txt" 2>&1
    local eb=$?
    echo "$name: exit $ea, hash $(hash_of "$name.a.txt"); with --mesh: exit $eb, hash $(hash_of "$name.b.txt")"
    [[ $ea == 0 && $eb == 0 && -n "$(hash_of "$name.a.txt")" &&
       "$(hash_of "$name.a.txt")" == "$(hash_of "$name.b.txt")" ]] ||
      { echo "FAIL: $name: the models differ"; grep -v '^I[0-9]' "$name.b.txt" | tail -n 5; status=1; }
  }
  same data -- --mesh=data:2 --metrics_out=metrics.json --trace_file=trace.json \
      --checkpoint_dir=ckpt
  same pipeline --pipeline_parallel=2 --micro_batches=2 -- --mesh=pipeline:2 --micro_batches=2
  same expert --model=moe --num_experts=4 -- --model=moe --num_experts=4 --mesh=expert:2
  python3 - <<'PY' || status=1
import json, sys
m = json.load(open("metrics.json"))
ok = m["world"] == 2 and m["mesh"] == {"pipeline": 1, "data": 2, "expert": 1} and \
    m["layout"].startswith("mesh data:2; tables: ")
record = json.load(open("ckpt/job.json"))["layout"]
trace = json.loads(json.load(open("trace.json.rank-1"))["otherData"]["layout"])
ok = ok and record["mesh"] == m["mesh"] and trace == record
print("metrics:", m["world"], m["mesh"], m["layout"], m["layout_hash"])
if not ok:
    print("FAIL: the metrics, job record and trace do not hold the layout"); sys.exit(1)
PY
  refused() {  # NP MESSAGE FLAGS...: refused at start, the message naming the flag.
    local np=$1 message=$2
    shift 2
    timeout 120 "${mpirun[@]}" -np "$np" "$ember" train "${short[@]}" "$@" >refused.txt 2>&1 &&
      { echo "FAIL: $* ran"; status=1; return; }
    grep -q -- "$message" refused.txt ||
      { echo "FAIL: $*: no '$message'"; grep -v '^I[0-9]' refused.txt | tail -n 5; status=1; }
  }
  # Resharding between layouts: resumes that train nothing keep the model.
  saved=(--max_steps=10)
  resumed() {  # DIR EXPECTED NP FLAGS...: a resume of DIR that trains nothing has hash EXPECTED.
    local dir=$1 expected=$2 np=$3
    shift 3
    local run=("$ember")
    ((np > 1)) && run=("${mpirun[@]}" -np "$np" "$ember")
    timeout 300 "${run[@]}" train "${short[@]}" "${saved[@]}" --checkpoint_dir="$dir" --resume \
        "$@" >resumed.txt 2>&1
    echo "  $dir on $np rank(s) $*: exit $?, hash $(hash_of resumed.txt)"
    [[ -n "$expected" && "$(hash_of resumed.txt)" == "$expected" ]] ||
      { echo "FAIL: $dir resumed with $* is not $expected"; grep -v '^I[0-9]' resumed.txt | tail -n 5; status=1; }
  }
  # (A MoE model runs no micro-batches: its routing's groups are batches.)
  for from in "data:2 --model=dcn_v2 --micro_batches=2" "pipeline:2 --model=dcn_v2 --micro_batches=2" \
              "expert:2 --model=moe --num_experts=4"; do
    read -r mesh model <<<"$from"
    dir="ck-${mesh/:/}"
    timeout 300 "${mpirun[@]}" -np 2 "$ember" train "${short[@]}" "${saved[@]}" $model \
        --mesh="$mesh" --checkpoint_dir="$dir" >saved.txt 2>&1 ||
      { echo "FAIL: saving under $mesh"; status=1; continue; }
    hash=$(hash_of saved.txt)
    echo "saved under $mesh ($model): hash $hash"
    case "$mesh" in
    data:2) resumed "$dir" "$hash" 2 $model --mesh=pipeline:2; resumed "$dir" "$hash" 1 $model ;;
    pipeline:2) resumed "$dir" "$hash" 2 $model --mesh=data:2; resumed "$dir" "$hash" 3 $model ;;
    expert:2) resumed "$dir" "$hash" 2 $model --mesh=data:2 ;;
    esac
  done
  timeout 300 "${mpirun[@]}" -np 2 "$ember" train "${short[@]}" --micro_batches=2 --max_steps=20 \
      --model=dcn_v2 --mesh=pipeline:2 --checkpoint_dir=ck-data2 --resume >on.txt 2>&1 &&
    grep -q "^test:  AUC" on.txt || { echo "FAIL: data:2 -> pipeline:2 did not train on"; status=1; }
  refused 2 "--mesh=data:3 has 3 ranks; this job has 2" --mesh=data:3
  refused 4 "layouts of several are not supported yet" --mesh=data:2,pipeline:2
  refused 2 "--table_sharding: slot 0 is replicated" --table_sharding=0=replicated
  refused 2 "--table_sharding names slot 40" --table_sharding=40=row_wise
  refused 2 "does not divide over expert:2" --model=moe --num_experts=3 --mesh=expert:2
  exit $status
  ;;
busy)
  # A pipeline's stages wait for rank 0 while it generates its data,
  # evaluates and checkpoints, each longer than --rank_timeout_seconds=1:
  # its heartbeat, not the timeout, bounds their wait, and the job succeeds.
  cd "$work"
  timeout 300 "${mpirun[@]}" -np 2 "$ember" train --rows=300000 --plan=off --threads=1 \
      --batch_size=256 --pipeline_parallel=2 --micro_batches=2 --rank_timeout_seconds=1 \
      --max_steps=30 --eval_every_steps=15 --checkpoint_dir=ck --checkpoint_every_steps=10 \
      >out.txt 2>&1
  rc=$?
  # Seconds from rank 0's first line about the data to its summary of it.
  seconds_of() { sed -n "s/^I[0-9]* \([0-9:.]*\) .*$1.*/\1/p" out.txt | head -1 |
                   awk -F: '{printf "%.6f\n", $1 * 3600 + $2 * 60 + $3}'; }
  read_seconds=$(awk -v a="$(seconds_of 'generating')" -v b="$(seconds_of '] data: ')" \
                   'BEGIN {print b - a}')
  echo "exit $rc; rank 0 read its data for $read_seconds s while the stages waited"
  ((rc == 0)) || { echo "FAIL: exit $rc"; grep -v '^I[0-9]' out.txt | tail -8; exit 1; }
  awk -v s="$read_seconds" 'BEGIN {exit !(s > 1)}' ||
    { echo "FAIL: rank 0 read its data within the rank timeout: the test shows nothing"; exit 1; }
  exit 0
  ;;
lost)
  cd "$work"
  how=$4
  victim_rank=$5
  launch=("${mpirun[@]}")
  signal=STOP
  if [[ "$how" == kill ]]; then launch+=(--enable-recovery); signal=KILL; fi
  setsid "${launch[@]}" -np 3 "$ember" train --rows=100000 --epochs=20 --plan=off --threads=1 \
      --batch_size=64 --rank_timeout_seconds=10 --progress_seconds=0.5 "${@:6}" >out.txt 2>&1 &
  launcher=$!
  # This job's ranks: the processes of the launcher's session running ember.
  ranks_of_job() { pgrep -s "$launcher" -f "$ember train"; }
  victim=""
  for _ in $(seq 600); do
    for pid in $(ranks_of_job); do
      if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null |
          grep -qx "OMPI_COMM_WORLD_RANK=$victim_rank"; then
        victim=$pid
      fi
    done
    [[ -n "$victim" ]] && grep -q "train steps" out.txt && break
    sleep 0.1
  done
  if [[ -z "$victim" ]] || ! grep -q "train steps" out.txt; then
    echo "FAIL: rank $victim_rank never trained"; kill -KILL -- "-$launcher"; cat out.txt; exit 1
  fi
  sleep 1
  kill -"$signal" "$victim"
  start=$(date +%s)
  status=0
  while kill -0 "$launcher" 2>/dev/null; do
    if (($(date +%s) - start > 60)); then
      echo "FAIL: the job still runs 60 s after rank $victim_rank got SIG$signal; its processes:"
      ps -o pid,stat,etime,time,args -s "$launcher" 2>/dev/null || true
      tail -20 out.txt
      kill -KILL -- "-$launcher"
      status=1
      break
    fi
    sleep 0.2
  done
  wait "$launcher"
  rc=$?
  echo "the launcher exited with $rc $(($(date +%s) - start)) s after SIG$signal to rank $victim_rank"
  grep '^ember train' out.txt | head -4
  grep -Eq "^ember train \(rank [0-9]+ of 3\): .*rank $victim_rank\b" out.txt ||
    { echo "FAIL: no rank's own message names rank $victim_rank"; tail -8 out.txt; status=1; }
  if [[ "$how" == stop ]]; then
    ((rc != 0)) || { echo "FAIL: exit 0"; status=1; }
  else
    # With --enable-recovery mpirun exits 0 whatever its ranks do: every
    # rank left must have failed by itself, saying so.
    for ((r = 0; r < 3; ++r)); do
      ((r == victim_rank)) && continue
      grep -Eq "^ember train \(rank $r of 3\): " out.txt ||
        { echo "FAIL: rank $r did not fail by itself"; status=1; }
    done
  fi
  sleep 2
  left=$(ranks_of_job)
  if [[ -n "$left" ]]; then
    echo "FAIL: processes of the job still run: $left"; kill -KILL $left; status=1
  fi
  exit $status
  ;;
lock)
  cd "$work"
  status=0
  # Starts the holder, `$@` (a long job), in a session of its own, and waits
  # until it trains; its group is killed at the end.
  start_holder() {
    setsid "$@" >holder.txt 2>&1 &
    holder=$!
    for _ in $(seq 600); do grep -q "train steps" holder.txt && return 0; sleep 0.1; done
    echo "FAIL: the first job never trained"; tail holder.txt; kill -KILL -- "-$holder"; exit 1
  }
  # Expects `$@` (the second job) to be refused at once, naming `dir`.
  expect_refused() {
    local dir=$1; shift
    timeout 120 "$@" >second.txt 2>&1
    local rc=$?
    grep -v '^I[0-9]' second.txt | grep -i "in use" | head -2
    if ((rc != 2)); then echo "FAIL: the second job exited $rc, not 2"; status=1; fi
    grep -Eq "$dir(/rank-[0-9]+)? is in use by another job \(pid [0-9]+ host [^ ]+ since " second.txt ||
      { echo "FAIL: the refusal does not name $dir and its holder"; tail -5 second.txt; status=1; }
    if grep -q "train steps" second.txt; then echo "FAIL: the second job trained"; status=1; fi
  }
  # The holder's processes are found by their --rows (no other test's).
  stop_holder() {
    kill -KILL -- "-$holder" 2>/dev/null; wait "$holder" 2>/dev/null
    for _ in $(seq 50); do pgrep -f "$ember train --rows=120000" >/dev/null || return 0; sleep 0.1; done
    echo "FAIL: processes of the killed job are left"; pkill -KILL -f "$ember train --rows=120000"
    status=1
  }
  long=(--rows=120000 --epochs=15 --plan=off --threads=1 --batch_size=64 --progress_seconds=0.5)
  short=(--rows=2000 --plan=off --threads=1 --batch_size=64)
  # One process: the checkpoints, then the disk tier.
  start_holder "$ember" train "${long[@]}" --checkpoint_dir=ckpt --embedding_memory_budget=1MB \
      --embedding_dir=rows
  grep -q "in use" holder.txt && { echo "FAIL: the first job was refused"; status=1; }
  expect_refused "$work/ckpt" "$ember" train "${short[@]}" --checkpoint_dir="$work/ckpt" --resume
  expect_refused "$work/rows" "$ember" train "${short[@]}" --checkpoint_dir=other \
      --embedding_memory_budget=1MB --embedding_dir="$work/rows"
  stop_holder
  timeout 120 "$ember" train "${short[@]}" --checkpoint_dir=fresh --embedding_memory_budget=1MB \
      --embedding_dir="$work/rows" >third.txt 2>&1 ||
    { echo "FAIL: a job after the killed one was refused: $(grep -i 'in use' third.txt)"; status=1; }
  # Ranks: a 2-rank job holds the job's directory and each rank its own.
  rm -rf ckpt
  start_holder "${mpirun[@]}" -np 2 "$ember" train "${long[@]}" --checkpoint_dir=ckpt
  expect_refused "$work/ckpt" "${mpirun[@]}" -np 2 "$ember" train "${short[@]}" \
      --checkpoint_dir="$work/ckpt" --resume
  expect_refused "$work/ckpt" "$ember" train "${short[@]}" --checkpoint_dir="$work/ckpt" --resume
  stop_holder
  exit $status
  ;;
resume)
  cd "$work"
  job=("${data[@]}" --threads=1 --batch_size=64 --epochs=3 "${@:4}")
  run() { timeout 300 "$@" >>out.txt 2>&1 || { echo "FAIL: $* exited $?"; grep -v '^I[0-9]' out.txt | tail -n 20; exit 1; }; }
  examples_of() { sed -n 's/^train: .*steps, \([0-9]*\) examples.*/\1/p' "$1"; }
  streamed=0
  if [[ " ${*:4} " == *" --reader=stream "* ]]; then
    # Files to stream (generated data is read into memory): each rank reads
    # a shard of them. Every example of an epoch is trained once, whatever
    # the number of ranks resuming it: 2 ranks that stop at step 10 and 3
    # that resume the checkpoint train the examples of 2 uninterrupted ranks.
    streamed=1
    "$ember" gen-data --rows=4800 --out=train.tsv >/dev/null 2>&1 &&
      "$ember" gen-data --rows=1200 --seed=2 --out=test.tsv >/dev/null 2>&1 ||
      { echo "FAIL: gen-data"; exit 1; }
    job=("${data[@]:1}" --train_data=train.tsv --test_data=test.tsv --threads=1 --batch_size=64
         --epochs=3 "${@:4}")
    one_epoch=("${job[@]}" --epochs=1)
    run "${mpirun[@]}" -np 2 "$ember" train "${one_epoch[@]}"
    whole_epoch=$(examples_of out.txt)
    : >out.txt
    run "${mpirun[@]}" -np 2 "$ember" train "${one_epoch[@]}" --max_steps=10 --checkpoint_dir=epoch
    before=$(examples_of out.txt)
    : >out.txt
    run "${mpirun[@]}" -np 3 "$ember" train "${one_epoch[@]}" --checkpoint_dir=epoch --resume
    after=$(examples_of out.txt)
    echo "one epoch on 2 ranks: $whole_epoch examples; 2 ranks to step 10: $before, then 3: $after"
    [[ -n "$whole_epoch" && $((before + after)) == "$whole_epoch" ]] ||
      { echo "FAIL: $before + $after examples trained across the resume, not $whole_epoch"; exit 1; }
    : >out.txt
  fi
  run "${mpirun[@]}" -np 2 "$ember" train "${job[@]}" --max_steps=50
  whole=$(hash_of out.txt)
  : >out.txt
  run "${mpirun[@]}" -np 2 "$ember" train "${job[@]}" --max_steps=25 --checkpoint_dir=ckpt \
      --checkpoint_every_steps=10
  : >out.txt
  run "${mpirun[@]}" -np 2 "$ember" train "${job[@]}" --max_steps=50 --checkpoint_dir=ckpt --resume
  resumed=$(hash_of out.txt)
  echo "uninterrupted $whole, resumed $resumed"
  [[ -n "$whole" && "$whole" == "$resumed" ]] || { echo "FAIL: the resumed model differs"; exit 1; }
  # Resumes ckpt on $1 ranks (1: one process) up to step $2, which RANKS
  # names with $3 ranks: the resharding is logged and, when $4 is given (a
  # resume that trains nothing), the model hash is $4: the same rows (keys,
  # vectors, optimizer state) and dense state.
  resume_on() {
    local n=$1 step=$2 from=$3 expected=${4:-}
    local launch=("${mpirun[@]}" -np "$n")
    ((n == 1)) && launch=()
    : >out.txt
    run "${launch[@]}" "$ember" train "${job[@]}" --max_steps="$step" --checkpoint_dir=ckpt --resume
    grep -q "resharding the checkpoint of step [0-9]* from $from ranks to $n" out.txt ||
      { echo "FAIL: no resharding from $from ranks to $n"; exit 1; }
    if [[ -n "$expected" && "$(hash_of out.txt)" != "$expected" ]]; then
      echo "FAIL: $from -> $n ranks: model $(hash_of out.txt), not $expected"; exit 1
    fi
  }
  resume_on 1 50 2 "$resumed"
  resume_on 3 50 2 "$resumed"
  : >out.txt
  run "${mpirun[@]}" -np 3 "$ember" train "${job[@]}" --max_steps=60 --checkpoint_dir=ckpt --resume
  grep -q '"ranks": 3' ckpt/RANKS && grep -q '"step": 60' ckpt/RANKS ||
    { echo "FAIL: RANKS does not name 3 ranks at step 60"; cat ckpt/RANKS; exit 1; }
  three=$(hash_of out.txt)
  [[ -n "$three" ]] || { echo "FAIL: 3 ranks printed no model hash"; exit 1; }
  resume_on 2 60 3 "$three"
  echo "2 ranks at step 50: $resumed, as resumed on 1 and 3 ranks; 3 ranks at 60: $three, as on 2"
  resume_on 1 65 3
  grep -q "^train: 5 steps" out.txt || { echo "FAIL: did not train on"; exit 1; }
  exit 0
  ;;
*)
  echo "unknown mode $mode"; exit 2 ;;
esac
