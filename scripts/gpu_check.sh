#!/usr/bin/env bash
# Runs every GPU check of Ember on this machine in one go, within ~5 minutes,
# and writes the results under one folder (first argument, else
# $EMBER_CHECK_OUT, else out/):
#   a. nvidia-smi and the device's properties;
#   b. the gpu-labelled gtests (ember_gpu_tests, ember_nccl_tests), XML reports;
#   c. smoke `ember train --dense_device=cuda` of every zoo model, f32 and bf16,
#      test AUC beside the same runs on the CPU;
#   d. dense_cuda_bench (fully connected vs bare cuBLAS);
#   e. one DLRM job CPU-only, GPU dense sequential, GPU dense pipelined (k=0,
#      k=1): samples/s, stage busy fractions, traces; and the same DLRM in
#      PyTorch entirely on the GPU (tools/bench/torch_gpu_dlrm.py);
#   f. summary.md, one page of all the above.
# Each step is time-boxed (`timeout`) and a failure never stops the next one;
# a step that cannot run (no GPU, no torch, time spent) is recorded as skipped
# with its reason. The summary is always written; the exit status is 0.
#
# Runs from an unpacked scripts/pack_for_device.sh pack (binaries in bin/,
# libraries in lib/, beside this script) or from the repository with a build
# in $EMBER_BUILD_DIR (default build/). The CUDA runtime, cuBLAS/cuBLASLt and
# NCCL are looked up on this machine: CUDA toolkit folders, the Python
# installation's site-packages/nvidia/*/lib, then `ldconfig -p`.
#
# Knobs (environment): EMBER_CHECK_BUDGET_S (whole run, default 290),
# EMBER_PYTHON (python3 with torch), EMBER_CHECK_SMOKE_ROWS (50000),
# EMBER_CHECK_HET_{ROWS,SECONDS,BATCH,DIM,BOTTOM,TOP,VOCAB,THREADS}: the
# heterogeneous job (500000 rows, 15 s per run (~20 s with its start), batch 4096, dim 32, bottom
# 512,256,32, top 1024,512,256, 100000 ids per slot, every thread).
set -uo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-${EMBER_CHECK_OUT:-out}}"
mkdir -p "$out" && out="$(cd "$out" && pwd)"
budget_s="${EMBER_CHECK_BUDGET_S:-290}"
t0=$SECONDS

if [[ -x "$here/bin/ember" ]]; then
  layout="pack ($here)"
  bin_ember="$here/bin/ember"
  bin_gpu_tests="$here/bin/ember_gpu_tests"
  bin_nccl_tests="$here/bin/ember_nccl_tests"
  bin_bench="$here/bin/dense_cuda_bench"
  pack_lib="$here/lib"
  bench_dir="$here/tools/bench"
else
  root="$(cd "$here/.." && pwd)"
  build="${EMBER_BUILD_DIR:-build}"
  [[ "$build" = /* ]] || build="$root/$build"
  layout="repository build ($build)"
  bin_ember="$build/tools/ember"
  bin_gpu_tests="$build/tests/gpu/ember_gpu_tests"
  bin_nccl_tests="$build/tests/gpu/ember_nccl_tests"
  bin_bench="$build/tools/bench/dense_cuda_bench"
  pack_lib=""
  bench_dir="$root/tools/bench"
fi

# Generated data stays out of the results folder (it would not travel back).
data_dir=$(mktemp -d "${TMPDIR:-/tmp}/ember_gpu_check.XXXXXX")
trap 'rm -rf "$data_dir"' EXIT
steps="$out/steps.tsv"  # step, status (ok|failed|skipped), seconds, detail
printf 'step\tstatus\tseconds\tdetail\n' > "$steps"
log() { echo "[gpu_check $(( SECONDS - t0 ))s] $*" | tee -a "$out/gpu_check.log"; }
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> "$steps"; log "$1: $2 ${4:+($4)}"; }
skip() { record "$1" skipped 0 "$2"; }
# Steps a-d leave reserve_s of the budget to step e, the headline measurement.
reserve_s=0
left_s() { echo $(( budget_s - reserve_s - (SECONDS - t0) )); }
# limit WANTED: a step's timeout, cut to the time left (0: no time left).
limit() { local l; l=$(left_s); (( l < 5 )) && { echo 0; return; }; (( $1 < l )) && echo "$1" || echo "$l"; }
# run_step NAME TIMEOUT_S LOGFILE CMD...: runs CMD under timeout, records it.
run_step() {
  local name=$1 want=$2 logf=$3; shift 3
  local t; t=$(limit "$want")
  if (( t == 0 )); then skip "$name" "time budget (${budget_s} s, ${reserve_s} s of it kept for step e) spent"; return 1; fi
  local s=$SECONDS rc=0
  timeout -k 10 "$t" "$@" > "$logf" 2>&1 || rc=$?
  local d=$(( SECONDS - s ))
  if (( rc == 0 )); then record "$name" ok "$d" "${logf#"$out"/}"; return 0; fi
  local last; last=$(tail -1 "$logf" | tr '\t|' '  ' | cut -c1-160)
  if (( rc == 124 || rc == 137 )); then record "$name" failed "$d" "timed out after ${t}s; ${logf#"$out"/}"
  else record "$name" failed "$d" "exit $rc; ${logf#"$out"/}: $last"; fi
  return 1
}

log "layout: $layout; results in $out; budget ${budget_s}s"
het_seconds="${EMBER_CHECK_HET_SECONDS:-15}"

# --- The pack's manifest ----------------------------------------------------------
if [[ -f "$here/MANIFEST" ]]; then
  bad=$(cd "$here" && while read -r sum _size path; do
          [[ -f "$path" && "$(sha256sum < "$path" | cut -d' ' -f1)" == "$sum" ]] || echo "$path"
        done < MANIFEST)
  if [[ -z "$bad" ]]; then record manifest ok 0 "$(wc -l < "$here/MANIFEST") files match"
  else record manifest failed 0 "differ: $(echo $bad)"; fi
fi

# --- Python (for torch and for site-packages) -------------------------------------
python=""
py_candidates=("${EMBER_PYTHON:-}" "${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python3}" "$(command -v python3 || true)"
               /opt/venv/bin/python3 /venv/bin/python3 /opt/conda/bin/python3
               "$HOME/venv/bin/python3" "$HOME/.venv/bin/python3" /opt/*/bin/python3
               /workspace/*/bin/python3 /usr/local/bin/python3 /usr/bin/python3)
for py in "${py_candidates[@]}"; do
  [[ -n "$py" && -x "$py" ]] || continue
  if timeout 60 "$py" -c 'import torch' > /dev/null 2>&1; then python="$py"; break; fi
  [[ -z "${python_no_torch:-}" ]] && python_no_torch="$py"
done
torch_reason=""
if [[ -z "$python" ]]; then
  python="${python_no_torch:-}"
  torch_reason="${python:+$python has no torch}"; torch_reason="${torch_reason:-no python3 found}"
fi
log "python: ${python:-none}${torch_reason:+ ($torch_reason)}"

# --- CUDA runtime, cuBLAS/cuBLASLt, NCCL -----------------------------------------
sonames="libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2"
[[ -n "$pack_lib" && -f "$pack_lib/DEVICE_LIBS" ]] && sonames="$(cat "$pack_lib/DEVICE_LIBS")"
dirs=()
for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda /usr/local/cuda-*; do
  [[ -n "$d" ]] && dirs+=("$d/lib64" "$d/lib" "$d/targets/x86_64-linux/lib")
done
site_dirs=""
if [[ -n "$python" ]]; then
  site_dirs=$(timeout 30 "$python" -c 'import site, sysconfig
print("\n".join([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]] + site.getsitepackages()))' 2>/dev/null)
fi
for sp in $site_dirs; do
  for d in "$sp"/nvidia/*/lib "$sp"/nvidia/*/lib64 "$sp"/torch/lib; do [[ -d "$d" ]] && dirs+=("$d"); done
done
ldconfig_out=$( (ldconfig -p || /sbin/ldconfig -p) 2>/dev/null)
cuda_path=""
: > "$out/libraries.txt"
for so in $sonames; do
  found=""
  for d in "${dirs[@]}"; do [[ -e "$d/$so" ]] && { found="$d/$so"; break; }; done
  [[ -z "$found" ]] && found=$(awk -v s="$so" '$1 == s {print $NF; exit}' <<< "$ldconfig_out")
  if [[ -n "$found" ]]; then
    echo "$so $found" >> "$out/libraries.txt"
    case ":$cuda_path:" in *":$(dirname "$found"):"*) ;; *) cuda_path="${cuda_path:+$cuda_path:}$(dirname "$found")" ;; esac
  else
    echo "$so NOT FOUND" >> "$out/libraries.txt"
  fi
done
ember_libs="${pack_lib:+$pack_lib:}$cuda_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# ldd_missing PATH: what the loader cannot find for each binary (libcuda aside:
# the CUDA runtime opens it itself), one "binary: ldd line" per line.
ldd_missing() {
  local b
  for b in "$bin_ember" "$bin_gpu_tests" "$bin_nccl_tests" "$bin_bench"; do
    if [[ ! -x "$b" ]]; then echo "$(basename "$b"): absent"; continue; fi
    LD_LIBRARY_PATH="$1" ldd "$b" 2>&1 |
      awk -v b="$(basename "$b")" '/not found/ && $1 !~ /^libcuda\.so/ {$1 = $1; print b ": " $0}'
  done
}
missing=$(ldd_missing "$ember_libs")
compat_note=""
# The pack's libstdc++ and libgcc_s (lib/compat) need glibc 2.36; they are
# used only where this machine's own are too old for the binaries.
if [[ -n "$missing" && -n "$pack_lib" && -d "$pack_lib/compat" ]] &&
   [[ -z "$(ldd_missing "$ember_libs:$pack_lib/compat")" ]]; then
  ember_libs="$ember_libs:$pack_lib/compat"; missing=""
  compat_note="; with lib/compat (this machine's libstdc++ is older)"
fi
log "libraries: $(tr '\n' ';' < "$out/libraries.txt")"
# Ember's binaries get the pack's libraries; python keeps its own environment.
ember_env=(env "LD_LIBRARY_PATH=$ember_libs" OMP_WAIT_POLICY=passive)
for b in "$bin_ember" "$bin_gpu_tests" "$bin_nccl_tests" "$bin_bench"; do
  [[ -x "$b" ]] && LD_LIBRARY_PATH="$ember_libs" ldd "$b" > "$out/ldd_$(basename "$b").txt" 2>&1
done
if [[ -z "$missing" ]]; then record libraries ok 0 "every binary resolves its libraries (ldd_*.txt)$compat_note"
else record libraries failed 0 "missing: $(echo "$missing" | head -5 | tr '\n' ';')"; fi
"${ember_env[@]}" "$bin_ember" > "$out/ember_usage.txt" 2>&1
grep -q 'Commands:' "$out/ember_usage.txt" && record load ok 0 "ember starts" ||
  record load failed 0 "ember does not start: $(tail -1 "$out/ember_usage.txt")"

# Four Ember runs of het_seconds plus their start and evaluation, the data and
# the PyTorch run.
reserve_s=$(( 4 * (het_seconds + 6) + 20 + het_seconds + 20 ))
# --- a. The device ---------------------------------------------------------------
gpu_reason=""
if ! command -v nvidia-smi > /dev/null; then
  [[ -e /dev/nvidia0 ]] || gpu_reason="no GPU: nvidia-smi not found and no /dev/nvidia0"
elif ! timeout 30 nvidia-smi -L > "$out/nvidia_smi_L.txt" 2>&1 || ! grep -q '^GPU' "$out/nvidia_smi_L.txt"; then
  gpu_reason="no GPU: nvidia-smi -L lists none ($(head -1 "$out/nvidia_smi_L.txt"))"
fi
[[ -z "$gpu_reason" ]] && grep -q 'NOT FOUND' "$out/libraries.txt" &&
  gpu_reason="CUDA libraries not found: $(awk '/NOT FOUND/ {print $1}' "$out/libraries.txt" | tr '\n' ' ')"

if [[ -n "$gpu_reason" ]]; then
  skip a_device "$gpu_reason"
else
  run_step a_device 30 "$out/a_nvidia_smi.txt" nvidia-smi
  timeout 30 nvidia-smi -q > "$out/a_nvidia_smi_q.txt" 2>&1
  timeout 30 nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap,clocks.max.sm,power.limit \
    --format=csv > "$out/a_device.csv" 2>&1
  if [[ -z "$torch_reason" ]]; then
    timeout 60 "$python" -c 'import torch; p = torch.cuda.get_device_properties(0)
print("torch", torch.__version__, "cuda", torch.version.cuda); print(p)' > "$out/a_torch_device.txt" 2>&1
  fi
fi

# --- b. GPU tests ----------------------------------------------------------------
if [[ -n "$gpu_reason" ]]; then
  skip b_gpu_tests "$gpu_reason"
  skip b_nccl_tests "$gpu_reason"
else
  run_step b_gpu_tests 90 "$out/b_gpu_tests.log" "${ember_env[@]}" "$bin_gpu_tests" --gtest_color=no \
    --gtest_output="xml:$out/b_gpu_tests.xml"
  run_step b_nccl_tests 30 "$out/b_nccl_tests.log" "${ember_env[@]}" "$bin_nccl_tests" --gtest_color=no \
    --gtest_output="xml:$out/b_nccl_tests.xml"
fi

# --- c. Smoke training: every zoo model, f32 and bf16, GPU beside CPU ------------
models="dlrm deepfm wide_deep dcn_v2 mmoe"
if [[ -n "$gpu_reason" ]]; then
  skip c_smoke "$gpu_reason"
else
  smoke="$out/c_smoke"; mkdir -p "$smoke"
  rows="${EMBER_CHECK_SMOKE_ROWS:-50000}"
  for tasks in 1 2; do  # mmoe trains on two labels, the others on one
    run_step "c_gen_data_tasks$tasks" 60 "$smoke/gen_data_tasks$tasks.log" "${ember_env[@]}" "$bin_ember" \
      gen-data --rows="$rows" --tasks=$tasks --out_format=columnar --out="$data_dir/smoke_tasks$tasks.col"
  done
  for model in $models; do
    data="$data_dir/smoke_tasks1.col"; [[ $model == mmoe ]] && data="$data_dir/smoke_tasks2.col"
    for precision in f32 bf16; do
      for device in cuda cpu; do
        run_step "c_${model}_${precision}_${device}" 30 "$smoke/${model}_${precision}_${device}.log" \
          "${ember_env[@]}" "$bin_ember" train --train_data="$data" --model="$model" --plan=off \
          --dense_device="$device" --dense_precision="$precision" --batch_size=1024 --epochs=1 \
          --metrics_out="$smoke/${model}_${precision}_${device}.json"
      done
    done
  done
fi

# --- d. dense_cuda_bench ---------------------------------------------------------
if [[ -n "$gpu_reason" ]]; then
  skip d_dense_cuda_bench "$gpu_reason"
else
  run_step d_dense_cuda_bench 40 "$out/d_dense_cuda_bench.txt" "${ember_env[@]}" "$bin_bench" \
    --benchmark_min_time=0.2 --benchmark_color=false --benchmark_counters_tabular=true \
    --benchmark_out="$out/d_dense_cuda_bench.json" --benchmark_out_format=json
fi

# --- e. The heterogeneous measurement --------------------------------------------
het_batch="${EMBER_CHECK_HET_BATCH:-4096}"
het_dim="${EMBER_CHECK_HET_DIM:-32}"
het_bottom="${EMBER_CHECK_HET_BOTTOM:-512,256,32}"
het_top="${EMBER_CHECK_HET_TOP:-1024,512,256}"
het_vocab="${EMBER_CHECK_HET_VOCAB:-100000}"
reserve_s=0
het="$out/e_hetero"
het_runs="cpu_only:--dense_device=cpu --pipeline=on --max_staleness=0
gpu_sequential:--dense_device=cuda --pipeline=off
gpu_pipelined_k0:--dense_device=cuda --pipeline=on --max_staleness=0
gpu_pipelined_k1:--dense_device=cuda --pipeline=on --max_staleness=1"
if [[ -n "$gpu_reason" ]]; then
  skip e_hetero "$gpu_reason"
else
  mkdir -p "$het"
  run_step e_gen_data 40 "$het/gen_data.log" "${ember_env[@]}" "$bin_ember" gen-data \
    --rows="${EMBER_CHECK_HET_ROWS:-500000}" --vocabulary="$het_vocab" --out_format=columnar \
    --out="$data_dir/hetero.col"
  while IFS=: read -r name flags; do
    # Each run trains for many epochs and is stopped by SIGINT after
    # het_seconds: Ember then evaluates, writes its metrics (interrupted: true)
    # and its trace, so every configuration is measured over the same time.
    t=$(limit $(( het_seconds + 40 )))
    if (( t < het_seconds + 10 )); then skip "e_$name" "time budget (${budget_s} s) spent"; continue; fi
    s=$SECONDS
    # shellcheck disable=SC2086
    LD_LIBRARY_PATH="$ember_libs" OMP_WAIT_POLICY=passive timeout -s INT -k $(( t - het_seconds )) \
      "$het_seconds" "$bin_ember" train --train_data="$data_dir/hetero.col" --model=dlrm --plan=off $flags \
      --threads="${EMBER_CHECK_HET_THREADS:-0}" --batch_size="$het_batch" --epochs=1000 \
      --embedding_dim="$het_dim" --bottom_mlp="$het_bottom" --top_mlp="$het_top" \
      --metrics_out="$het/$name.json" --trace_file="$het/$name.trace.json" > "$het/$name.log" 2>&1
    rc=$?
    if [[ -s "$het/$name.json" ]]; then record "e_$name" ok $(( SECONDS - s )) "$( (( rc == 124 )) && echo "stopped by SIGINT after ${het_seconds} s as planned" || echo "exit $rc")"
    else record "e_$name" failed $(( SECONDS - s )) "exit $rc, no metrics; e_hetero/$name.log: $(tail -1 "$het/$name.log" | tr '\t|' '  ' | cut -c1-160)"; fi
    [[ -f "$het/$name.trace.json" ]] && gzip -f "$het/$name.trace.json"
  done <<< "$het_runs"
fi
torch_script="$bench_dir/torch_gpu_dlrm.py"
if [[ -n "$gpu_reason" ]]; then
  skip e_torch_gpu "$gpu_reason"
elif [[ -n "$torch_reason" ]]; then
  skip e_torch_gpu "$torch_reason"
elif [[ ! -f "$torch_script" ]]; then
  skip e_torch_gpu "$torch_script not found"
else
  run_step e_torch_gpu $(( het_seconds + 60 )) "$het/torch_gpu.log" "$python" "$torch_script" \
    --seconds="$het_seconds" --batch_size="$het_batch" --embedding_dim="$het_dim" \
    --bottom_mlp="$het_bottom" --top_mlp="$het_top" --vocabulary="$het_vocab" \
    --json_out="$het/torch_gpu.json"
fi

# --- f. Summary ------------------------------------------------------------------
# num FILE KEY: the first number after "KEY": in FILE (Ember's metrics JSON
# lists test before train, so "auc" is the test AUC).
num() { [[ -f "$1" ]] && sed -n "s/^ *\"$2\": *\([-0-9.eE+]*\).*/\1/p" "$1" | head -1; }
fmt() { [[ -n "$1" ]] && printf "%.${2:-4}f" "$1" 2>/dev/null || echo "–"; }
{
  echo "# Ember GPU check"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname); layout: $layout; $(( SECONDS - t0 )) s of a ${budget_s} s budget."
  echo
  echo "- GPU: $( [[ -n "$gpu_reason" ]] && echo "$gpu_reason" || tail -n +2 "$out/a_device.csv" 2>/dev/null | head -1)"
  echo "- glibc: $(ldd --version 2>/dev/null | head -1 | awk '{print $NF}'); python: ${python:-none}${torch_reason:+ ($torch_reason)}"
  echo "- libraries used:"
  sed 's/^/  - /' "$out/libraries.txt"
  echo
  echo "## Steps"
  echo
  echo "| step | status | s | detail |"
  echo "| --- | --- | --- | --- |"
  tail -n +2 "$steps" | awk -F'\t' '{printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4}'
  echo
  echo "## b. GPU tests"
  echo
  for x in "$out"/b_*.xml; do
    [[ -f "$x" ]] || { echo "No XML report."; break; }
    head -3 "$x" | grep -o '<testsuites[^>]*' | sed 's/<testsuites/'"$(basename "$x")"':/; s/ name="[^"]*"//; s/ timestamp="[^"]*"//'
    echo "  skipped: $(grep -c 'result="skipped"' "$x")"
    grep -B0 -A1 '<failure' "$x" | grep -o 'message="[^"]\{0,160\}' | sed 's/^/  - failure: /' | head -10
  done
  echo
  echo "## c. Smoke training (test AUC; ${EMBER_CHECK_SMOKE_ROWS:-50000} generated rows)"
  echo
  echo "| model | f32 cuda | f32 cpu | bf16 cuda | bf16 cpu |"
  echo "| --- | --- | --- | --- | --- |"
  for model in $models; do
    row="| $model"
    for c in f32_cuda f32_cpu bf16_cuda bf16_cpu; do row+=" | $(fmt "$(num "$out/c_smoke/${model}_$c.json" auc)")"; done
    echo "$row |"
  done
  echo
  echo "## d. dense_cuda_bench"
  echo
  if [[ -f "$out/d_dense_cuda_bench.txt" ]]; then echo '```'; grep -v '^\*\*\*\|^-*$' "$out/d_dense_cuda_bench.txt" | grep -v "^ *L[0-9] \|^CPU Caches\|^Load Average\|^Run on\|^20[0-9][0-9]-" | head -40; echo '```'
  else echo "Not run."; fi
  echo
  echo "## e. Heterogeneous DLRM (batch $het_batch, dim $het_dim, bottom $het_bottom, top $het_top, $het_vocab ids/slot, ${het_seconds} s per run)"
  echo
  echo "| run | samples/s | vs CPU-only | read | unique | pull | dense | push | test AUC |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  cpu_sps=$(num "$het/cpu_only.json" samples_per_sec)
  while IFS=: read -r name flags; do
    j="$het/$name.json"; sps=$(num "$j" samples_per_sec); secs=$(num "$j" seconds)
    row="| $name (\`$flags\`) | $(fmt "$sps" 0) | $( [[ -n "$sps" && -n "$cpu_sps" ]] && awk -v a="$sps" -v b="$cpu_sps" 'BEGIN {printf "%.2fx", a / b}' || echo –)"
    for st in read unique pull dense push; do
      v=$(num "$j" "$st")
      row+=" | $( [[ -n "$v" && -n "$secs" ]] && awk -v a="$v" -v b="$secs" 'BEGIN {printf "%.0f%%", 100 * a / b}' || echo –)"
    done
    echo "$row | $(fmt "$(num "$j" auc)") |"
  done <<< "$het_runs"
  tsps=$(num "$het/torch_gpu.json" samples_per_sec)
  echo "| PyTorch, all on the GPU (torch_gpu_dlrm.py, random batches) | $(fmt "$tsps" 0) | $( [[ -n "$tsps" && -n "$cpu_sps" ]] && awk -v a="$tsps" -v b="$cpu_sps" 'BEGIN {printf "%.2fx", a / b}' || echo –) | | | | | | |"
  echo
  echo "Stage columns: busy time / training wall time (pipelined stages overlap, so they may sum past 100%)."
  echo "Traces: e_hetero/*.trace.json.gz (chrome://tracing). Logs, metrics JSON and XML: beside this file."
} > "$out/summary.md"
log "summary: $out/summary.md"
exit 0
