#!/bin/bash
# A rank lost in the middle of a job's collectives makes the job exit
# non-zero within a bound, with output that names the lost rank, and leaves
# no process behind. MODE kill: rank 1 dies of SIGKILL (mpirun notices);
# MODE stop: rank 1 stops (SIGSTOP), which mpirun cannot see, so the other
# ranks' communicator timeouts (5 s) must name it.
#
# Usage: mpi_rank_loss_test.sh MPIEXEC PROGRAM kill|stop [BOUND_SECONDS]
set -u
mpiexec=$1
program=$2
mode=$3
bound=${4:-60}
case "$mode" in
  kill) flags=(--victim=1 --kill_step=5) ;;
  stop) flags=(--victim=1 --kill_step=5 --stop=1 --timeout_seconds=5) ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# mpirun in a session of its own, so that a stuck job can be ended whole.
# OpenMPI puts each rank in a process group of its own, so the ranks are
# also checked (and ended) by the pids they print.
setsid "$mpiexec" --allow-run-as-root --oversubscribe -np 3 "$program" "${flags[@]}" >"$log" 2>&1 &
launcher=$!
start=$(date +%s)
while kill -0 "$launcher" 2>/dev/null; do
  if (($(date +%s) - start > bound)); then
    echo "FAIL: mpirun still runs after ${bound} s; ending it"
    kill -KILL -- "-$launcher" 2>/dev/null
    for pid in $(sed -n 's/^rank [0-9]* pid \([0-9]*\)$/\1/p' "$log"); do kill -KILL "$pid" 2>/dev/null; done
    cat "$log"
    exit 1
  fi
  sleep 0.2
done
wait "$launcher"
rc=$?
elapsed=$(($(date +%s) - start))
cat "$log"
echo "mpirun exited with $rc after ${elapsed} s"
status=0
if ((rc == 0)); then
  echo "FAIL: mpirun exited 0 although rank 1 was lost"
  status=1
fi
if ! grep -Eq "rank 1\b" <(grep -v '^rank 1 pid ' "$log"); then
  echo "FAIL: the output does not name rank 1"
  status=1
fi
# mpirun may exit while the ranks it ended are still exiting: give them a
# few seconds, then report (and end) whatever still runs.
alive() {
  local pid state
  for pid in $(sed -n 's/^rank [0-9]* pid \([0-9]*\)$/\1/p' "$log") $(pgrep -s "$launcher"); do
    state=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)
    if [[ -n "$state" && "$state" != Z ]]; then echo "$pid"; fi
  done | sort -u
}
for _ in $(seq 50); do
  [[ -z "$(alive)" ]] && break
  sleep 0.2
done
left=$(alive)
if [[ -n "$left" ]]; then
  echo "FAIL: processes of the job still run 10 s after mpirun exited: $(echo $left)"
  for pid in $left; do kill -KILL "$pid" 2>/dev/null; done
  status=1
fi
exit $status
