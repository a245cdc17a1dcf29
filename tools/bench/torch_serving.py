#!/usr/bin/python3
"""The forward of tools/bench/torch_ctr.py's model (its Ctr class, unchanged),
timed the way tools/bench/serving_bench.cc times libember_serving: latency of
one scoring call at each --batches size (median and p99 over the calls of
--seconds) from one calling thread, and examples/s from --callers threads
calling at once; torch.set_num_threads(1), so that each call runs on one
thread as the C library's calls do (ember_model_open(..., 1, ...)).

Random dense features and ids uniform over --table_rows rows: a forward's
cost does not depend on the values.

Prints one JSON object: {"torch": version, "runs": [{"batch", "threads",
"p50_us", "p99_us", "examples_per_sec"}, ...]}; exits 3 with a line on
stderr when torch cannot be imported.
"""
import argparse
import json
import os
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import numpy as np
    import torch
    import torch_ctr  # noqa: E402
except ImportError as e:  # python3-torch: scripts/install_deps.sh --with-bench-baseline
    print("cannot import %s (scripts/install_deps.sh --with-bench-baseline installs it)" % e.name,
          file=sys.stderr)
    sys.exit(3)


def calls(model, dense, ids, batch, seconds, first):
    """Latencies (us) of forward calls on `batch` examples from row `first`,
    until `seconds` have passed (at least 20 calls)."""
    d, i = dense[first:first + batch], ids[first:first + batch]
    micros = []
    end = time.perf_counter() + seconds
    with torch.inference_mode():
        model(d, i)  # warm-up: first-call allocations
        while len(micros) < 20 or time.perf_counter() < end:
            start = time.perf_counter()
            model(d, i)
            micros.append((time.perf_counter() - start) * 1e6)
    return micros


def run(model, dense, ids, batch, threads, seconds):
    results = [None] * threads

    def caller(t):
        results[t] = calls(model, dense, ids, batch, seconds, (t * 997) % (len(ids) - batch))

    start = time.perf_counter()
    workers = [threading.Thread(target=caller, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    wall = time.perf_counter() - start
    # Per-thread percentiles, averaged over the threads (as serving_bench's
    # counters are); examples of every thread over the wall time.
    p50 = float(np.mean([np.percentile(m, 50) for m in results]))
    p99 = float(np.mean([np.percentile(m, 99) for m in results]))
    examples = sum(len(m) + 1 for m in results) * batch
    return {"batch": batch, "threads": threads, "p50_us": p50, "p99_us": p99,
            "examples_per_sec": examples / wall}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="dlrm", choices=["dlrm", "deepfm", "dcn_v2"])
    p.add_argument("--num_dense", type=int, default=13)
    p.add_argument("--num_slots", type=int, default=26)
    p.add_argument("--table_rows", type=int, default=100000)
    p.add_argument("--embedding_dim", type=int, default=16)
    p.add_argument("--bottom_mlp", default="512,256,64")
    p.add_argument("--top_mlp", default="512,256")
    p.add_argument("--cross_layers", type=int, default=3)
    p.add_argument("--batches", default="1,64,512", help="latency at each, from 1 thread")
    p.add_argument("--throughput", default="512:1,512:2",
                   help="batch:threads pairs measured for examples/s")
    p.add_argument("--seconds", type=float, default=1.0, help="per measurement")
    a = p.parse_args()
    torch.manual_seed(1)
    torch.set_num_threads(1)
    model = torch_ctr.Ctr(a.model, a.num_dense, a.num_slots, a.table_rows, False, a).eval()
    rows = 4096
    dense = torch.rand(rows, a.num_dense)
    ids = torch.randint(0, a.table_rows, (rows, a.num_slots))
    cases = [(int(b), 1) for b in a.batches.split(",") if b]
    cases += [tuple(int(x) for x in pair.split(":")) for pair in a.throughput.split(",") if pair]
    runs = []
    for batch, threads in dict.fromkeys(cases):
        runs.append(run(model, dense, ids, batch, threads, a.seconds))
    print(json.dumps({"torch": torch.__version__, "runs": runs}))


if __name__ == "__main__":
    main()
