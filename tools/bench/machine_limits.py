"""This machine's limits, measured, and the per-step floor of a training case.

Each is the best of several measurements (REPETITIONS).

  memory bandwidth   torch copy_ of 256 MiB f32 tensors on T threads (bytes
                     read + written per second, the best of several copies)
  SGEMM GFLOP/s      tools/bench/dense_bench (bare oneDNN SGEMMs, the three
                     products of a layer's step) at each layer shape of the
                     models, on T threads
  bf16 GEMM GFLOP/s  the same products with bf16 operands, f32 sums and f32
                     outputs (dense_bench's BM_Bf16Gemm, operands rounded to
                     bf16 before the clock starts), for the bf16 cases
  row gather rate    tools/bench/embedding_bench's random-gather limit: unique
                     rows of dim 16 gathered from a flat array and scattered
                     back, Zipf keys over as many rows as the case touches

The floor of one step (batch B) on T threads adds, with no overlap and each
rate the best measured with at most T threads:
  MLP FLOPs (6 B in out per layer; cross layers as d x d layers; the DLRM
  dot interaction's 3 x 2 B F^2 dim) at the measured rate of each shape,
  + the batch's unique embedding rows at the gather/scatter rate,
  + bytes at the measured bandwidth: sparse optimizer state (Adagrad: read +
  write dim floats per unique row) and the rows' gradients (write + read),
  dense Adam (read w, g, m, v; write w, m, v: 28 B per parameter), and
  activations (every activation written forward, read backward, its gradient
  written and read: 16 B per float).
A real step cannot be faster than this sum's parts run one after another at
the machine's measured rates; pipelining may overlap them, so the floor is a
bound for a sequential step, not for a perfectly overlapped one. A bf16 case's
floor is the same sum with the bf16 GEMM rates; its bytes are counted as in
f32, since Ember keeps activations, weights and optimizer state in f32 and
rounds to bf16 only inside the GEMMs (the roundings themselves are not
counted).
"""
import json
import os
import subprocess
import sys
import tempfile

# Each rate is the best of this many repetitions: on a shared machine the
# best is the closest to what the hardware can do.
REPETITIONS = 5


def bandwidth_gbs(threads):
    """Copy bandwidth in GB/s (read + write bytes), measured in a child
    process so that torch's thread count is its own."""
    code = (
        "import time, torch\n"
        "torch.set_num_threads(%d)\n"
        "a = torch.ones(64 << 20); b = torch.empty_like(a)\n"
        "b.copy_(a)\n"
        "best = 1e9\n"
        "for _ in range(8):\n"
        "    t = time.perf_counter(); b.copy_(a); best = min(best, time.perf_counter() - t)\n"
        "print(2 * a.numel() * 4 / best / 1e9)\n" % threads)
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         env=env)
    return float(out.stdout.strip())


def _benchmark_json(cmd):
    """Runs a Google Benchmark binary; returns its JSON report (written with
    --benchmark_out, since the binaries print their own console report)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run(cmd + ["--benchmark_out=" + out.name, "--benchmark_out_format=json"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out.name) as f:
            return json.load(f)


def sgemm_gflops(dense_bench, threads, shapes, benchmark="BM_DnnlSgemm"):
    """{(B, in, out): GFLOP/s of the bare SGEMMs} for each shape; with
    benchmark="BM_Bf16Gemm", of the bare bf16 GEMMs."""
    spec = ",".join("%d/%d/%d" % s for s in sorted(set(shapes)))
    report = _benchmark_json([dense_bench, "--threads=%d" % threads, "--rounds=0",
                              "--shapes=" + spec, "--benchmark_filter=^%s/" % benchmark,
                              "--benchmark_min_time=0.1", "--benchmark_repetitions=%d" % REPETITIONS])
    rates = {}
    for b in report["benchmarks"]:
        if b.get("run_type", "iteration") != "iteration":
            continue
        parts = b["name"].split("/")
        shape = (int(parts[1]), int(parts[2]), int(parts[3]))
        rates[shape] = max(rates.get(shape, 0.0), b["GFLOPs"])
    return rates


def bf16_missing(dense_bench):
    """None if dense_bench measures bf16 GEMMs on this machine, else why not
    (what its "BM_Bf16Gemm: skipped, ..." line says)."""
    out = subprocess.run([dense_bench, "--rounds=0", "--benchmark_list_tests=true",
                          "--benchmark_filter=^BM_Bf16Gemm/"], check=True, capture_output=True,
                         text=True).stdout
    if "BM_Bf16Gemm/" in out:
        return None
    prefix = "BM_Bf16Gemm: skipped, "
    said = [line[len(prefix):] for line in out.splitlines() if line.startswith(prefix)]
    return said[0] if said else "dense_bench lists no BM_Bf16Gemm"


def gather_rows_per_sec(embedding_bench, threads, rows, unique_keys, bench_dir):
    report = _benchmark_json([embedding_bench, "--threads=%d" % threads, "--rows=%d" % rows,
                              "--unique_keys=%d" % unique_keys, "--bench_dir=" + bench_dir,
                              "--benchmark_filter=^gather/dim:16/zipf/",
                              "--benchmark_min_time=0.1",
                              "--benchmark_repetitions=%d" % REPETITIONS])
    return max(b["keys/s"] for b in report["benchmarks"]
               if b["name"].startswith("gather/") and b.get("run_type", "iteration") == "iteration")


def model_layers(model, num_dense, num_slots, dim, bottom, top, cross_layers):
    """(fc shapes (in, out), extra interaction FLOPs per sample for one step,
    activation floats per sample, dense parameter count)."""
    layers, extra = [], 0.0
    width = num_dense + num_slots * dim
    if model == "dlrm":
        f, direct = num_slots, num_slots * dim
        if num_dense > 0:
            widths = [num_dense] + (bottom if bottom and bottom[-1] == dim else bottom + [dim])
            layers += list(zip(widths[:-1], widths[1:]))
            f, direct = num_slots + 1, dim
        extra = 3 * 2.0 * f * f * dim
        widths = [direct + f * (f - 1) // 2] + top + [1]
        layers += list(zip(widths[:-1], widths[1:]))
    elif model == "deepfm":
        layers.append((width, 1))
        widths = [width] + top + [1]
        layers += list(zip(widths[:-1], widths[1:]))
        extra = 3 * 3.0 * num_slots * dim
    elif model == "dcn_v2":
        layers += [(width, width)] * cross_layers
        widths = [width] + top + [1]
        layers += list(zip(widths[:-1], widths[1:]))
    activations = num_slots * dim + sum(o for _, o in layers) + sum(i for i, _ in layers)
    params = sum(i * o + o for i, o in layers)
    return layers, extra, activations, params


def floor_step_seconds(batch, layers, extra_flops, activations, params, unique_rows, dim,
                       gemm_rates, gather_rate, bandwidth):
    """The floor of one step and its parts, in seconds."""
    rates = [gemm_rates[(batch, i, o)] for i, o in layers]
    gemm = sum(6.0 * batch * i * o / (r * 1e9) for (i, o), r in zip(layers, rates))
    mean_rate = sum(rates) / len(rates)
    gemm += batch * extra_flops / (mean_rate * 1e9)
    rows = unique_rows / gather_rate
    bytes_ = unique_rows * dim * 4 * 4 + params * 28 + batch * activations * 16
    memory = bytes_ / (bandwidth * 1e9)
    return {"gemm": gemm, "rows": rows, "bytes": memory, "total": gemm + rows + memory}
