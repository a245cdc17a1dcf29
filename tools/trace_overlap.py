#!/usr/bin/python3
"""How much the stages of a training run overlapped, from its Chrome trace.

Reads the trace `ember train --trace_file=FILE` writes (one complete event,
"ph": "X", per stage per batch) and prints, for the span of the run:
  * each stage's busy time and busy fraction;
    (time in "wait" spans, e.g. a pull waiting for pushes, is not busy);
  * the fraction of the run during which 0, 1, 2, ... stages were busy at once
    (a sequential run never has more than 1; a pipeline that overlaps well
    spends most of its time at 2 or more);
  * the batches in flight at once (read but not yet pushed), at most and on
    average over time.

Usage: tools/trace_overlap.py TRACE.json [--category=stage]
"""
import argparse
import json
import sys
from collections import defaultdict


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace", help="a Chrome trace written by ember train --trace_file")
    parser.add_argument("--category", default="stage", help="event category of stage spans")
    args = parser.parse_args()
    try:
        with open(args.trace) as f:
            trace = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"trace_overlap: cannot read {args.trace}: {e}")
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    spans = [e for e in events if e.get("ph") == "X" and e.get("cat") == args.category]
    waits = [e for e in events if e.get("ph") == "X" and e.get("cat") == "wait"]
    if not spans:
        sys.exit(f"trace_overlap: no '{args.category}' spans in {args.trace}")
    start = min(e["ts"] for e in spans)
    end = max(e["ts"] + e["dur"] for e in spans)
    total = max(end - start, 1)

    busy = defaultdict(float)
    changes = defaultdict(int)  # time -> change in busy stages
    batch_first, batch_last = {}, {}
    for e in spans:
        busy[e["name"]] += e["dur"]
        changes[e["ts"]] += 1
        changes[e["ts"] + e["dur"]] -= 1
        batch = e.get("args", {}).get("batch")
        if batch is not None:
            batch_first[batch] = min(batch_first.get(batch, e["ts"]), e["ts"])
            batch_last[batch] = max(batch_last.get(batch, 0), e["ts"] + e["dur"])

    # A wait span lies inside a stage span of its thread: that stage is idle
    # meanwhile.
    by_thread = defaultdict(list)
    for e in spans:
        by_thread[e.get("tid")].append(e)
    for w in waits:
        for e in by_thread.get(w.get("tid"), []):
            if e["ts"] <= w["ts"] and w["ts"] + w["dur"] <= e["ts"] + e["dur"]:
                busy[e["name"]] -= w["dur"]
                changes[w["ts"]] -= 1
                changes[w["ts"] + w["dur"]] += 1
                break

    print(f"{len(spans)} spans over {total / 1e6:.3f} s")
    for name, us in sorted(busy.items(), key=lambda kv: -kv[1]):
        print(f"  {name:10s} busy {us / 1e6:8.3f} s ({100 * us / total:5.1f}%)")

    at_once = defaultdict(float)
    level, previous = 0, start
    for t in sorted(changes):
        at_once[level] += t - previous
        level += changes[t]
        previous = t
    print("stages busy at once (share of the run):")
    for n in sorted(at_once):
        print(f"  {n}: {100 * at_once[n] / total:5.1f}%")

    if batch_first:
        flight = defaultdict(int)
        for b in batch_first:
            flight[batch_first[b]] += 1
            flight[batch_last[b]] -= 1
        level, previous, area, most = 0, start, 0.0, 0
        for t in sorted(flight):
            area += level * (t - previous)
            level += flight[t]
            most = max(most, level)
            previous = t
        print(f"batches in flight: at most {most}, on average {area / total:.2f}")


if __name__ == "__main__":
    main()
