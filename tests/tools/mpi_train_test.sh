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
#   kill [FLAGS...]
#               a rank killed (SIGKILL) mid-run ends the job non-zero within
#               60 s, with output naming it, and no process is left (FLAGS:
#               added to the job's, e.g. a pipeline's).
#   resume      2 ranks stopped at a checkpoint resume to the model of an
#               uninterrupted run (same hash); the checkpoint resumes on 3
#               ranks and on 1 (resharded) and trains on.
#   pipeline N  --pipeline_parallel=N (issue 32): DCN-v2 split into 2 chunks a
#               rank over N ranks, interleaved 1F1B, trains the model one rank
#               trains with the same micro-batches: same --model_hash.
#   moe N       --model=moe with its experts divided among N ranks (issue 33)
#               trains the model one rank trains in N row ranges (the
#               routing's groups): same --model_hash; rows crossed between
#               ranks (the metrics' moe exchanged_bytes).
#
# Usage: mpi_train_test.sh MPIEXEC EMBER equal N | flags | kill [FLAGS...] | resume | pipeline N |
#        moe N
set -u
mpiexec=$1
ember=$(realpath "$2")
mode=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpirun=("$mpiexec" --allow-run-as-root --oversubscribe)
# Generated data: every rank generates the same examples (seeded).
data=(--rows=6000 --plan=off --model_hash --bottom_mlp=64,16 --top_mlp=64,32)

hash_of() { sed -n 's/^model hash: //p' "$1"; }
auc_of() { sed -n 's/^test:  AUC \([0-9.]*\).*/\1/p' "$1"; }

case "$mode" in
equal)
  n=$4
  status=0
  for extra in "--pipeline=on" "--pipeline=off" "--embedding_memory_budget=2MB"; do
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
kill)
  cd "$work"
  setsid "${mpirun[@]}" -np 3 "$ember" train --rows=400000 --epochs=5 --plan=off --threads=1 \
      --batch_size=64 "${@:4}" >out.txt 2>&1 &
  launcher=$!
  # Rank 1 is killed once every rank trains.
  victim=""
  for _ in $(seq 600); do
    for pid in $(pgrep -f "$ember train --rows=400000"); do
      if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then
        victim=$pid
      fi
    done
    [[ -n "$victim" ]] && grep -q "train steps" out.txt && break
    sleep 0.1
  done
  if [[ -z "$victim" ]]; then
    echo "FAIL: rank 1 never started"; kill -KILL -- "-$launcher"; cat out.txt; exit 1
  fi
  ranks=$(pgrep -f "$ember train --rows=400000")
  kill -KILL "$victim"
  start=$(date +%s)
  while kill -0 "$launcher" 2>/dev/null; do
    if (($(date +%s) - start > 60)); then
      echo "FAIL: the job still runs 60 s after rank 1 was killed; its processes and output:"
      ps -o pid,stat,etime,time,args -p "$(echo $ranks $launcher | tr ' ' ',')" 2>/dev/null || true
      tail -20 out.txt
      kill -KILL -- "-$launcher"; for pid in $ranks; do kill -KILL "$pid" 2>/dev/null; done
      exit 1
    fi
    sleep 0.2
  done
  wait "$launcher"
  rc=$?
  echo "mpirun exited with $rc $(($(date +%s) - start)) s after rank 1 was killed"
  grep -v '^I[0-9]' out.txt | tail -8
  status=0
  ((rc != 0)) || { echo "FAIL: exit 0"; status=1; }
  grep -Eq "rank 1\b" out.txt || { echo "FAIL: the output does not name rank 1"; status=1; }
  sleep 5
  for pid in $ranks; do
    if kill -0 "$pid" 2>/dev/null && [[ "$(sed 's/.*) //' /proc/$pid/stat | cut -d' ' -f1)" != Z ]]; then
      echo "FAIL: rank process $pid still runs"; kill -KILL "$pid"; status=1
    fi
  done
  exit $status
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
resume)
  cd "$work"
  job=("${data[@]}" --threads=1 --batch_size=64 --epochs=3)
  run() { timeout 300 "$@" >>out.txt 2>&1 || { echo "FAIL: $* exited $?"; grep -v '^I[0-9]' out.txt | tail -n 20; exit 1; }; }
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
  : >out.txt
  run "${mpirun[@]}" -np 3 "$ember" train "${job[@]}" --max_steps=60 --checkpoint_dir=ckpt --resume
  grep -q "resharding the checkpoint of step 50 from 2 ranks to 3" out.txt ||
    { echo "FAIL: no resharding from 2 ranks to 3"; exit 1; }
  grep -q '"ranks": 3' ckpt/RANKS && grep -q '"step": 60' ckpt/RANKS ||
    { echo "FAIL: RANKS does not name 3 ranks at step 60"; cat ckpt/RANKS; exit 1; }
  : >out.txt
  run "$ember" train "${job[@]}" --max_steps=65 --checkpoint_dir=ckpt --resume
  grep -q "resharding the checkpoint of step 60 from 3 ranks to 1" out.txt ||
    { echo "FAIL: no resharding from 3 ranks to 1"; exit 1; }
  grep -q "^train: 5 steps" out.txt || { echo "FAIL: did not train on"; exit 1; }
  exit 0
  ;;
*)
  echo "unknown mode $mode"; exit 2 ;;
esac
