#!/usr/bin/env python3
"""Ember's crash test, in the spirit of RocksDB's db_crashtest.py.

Trains small jobs with checkpoints and kills them at random moments (SIGKILL,
SIGTERM) and at the named crash points compiled into Ember
(core/crash_point.h), restarting each with the same command (which resumes
from its newest checkpoint) until it finishes. Every finished job's model
hash (`ember train --model_hash`: dense weights and optimizer state, every
embedding row by key) must equal that of the same job run uninterrupted.

Modes: sequential (--pipeline=off), pipelined (--pipeline=on) and both with
a disk tier (an embedding memory budget far below the table, so rows live in
RocksDB). Prints one line per trial and a summary:

  crashtest: 40 trials, 300 kills (...), 345 runs; 40 equal, 0 different, 0 failed

and exits 1 if any job ended with another model ("different"), any run
failed otherwise (an unexpected exit status, a hang, a sanitizer report), or
a crash point that was asked for was never reached.

Small run (part of the test suite): crashtest.py --ember=build/tools/ember --kills=40
Long run (the issue's 300 kills):   crashtest.py --ember=build/tools/ember --kills=300
Under ASan: the same with build-asan/tools/ember (scripts/run_sanitizers.sh).
"""

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

CRASH_POINTS = [
    "tier.created_database",       # the tier's database made, its column family not yet
    "checkpoint.dense_written",    # dense-<step>.bin renamed, the embedding snapshot not begun
    "checkpoint.snapshot_files",   # a snapshot's data files written, its MANIFEST not yet
    "checkpoint.snapshot_manifest",  # MANIFEST written, the directory not yet renamed
    "checkpoint.snapshot_renamed",  # the snapshot committed, older ones not yet removed
]
DISK_POINTS = {"tier.created_database"}

MODES = {
    "sequential": ["--pipeline=off"],
    "pipelined": ["--pipeline=on"],
    "sequential-disk": ["--pipeline=off", "--embedding_memory_budget=1MB"],
    "pipelined-disk": ["--pipeline=on", "--embedding_memory_budget=1MB"],
}

SIGTERM_STOPPED = 128 + signal.SIGTERM  # ember train's exit after a graceful stop


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ember", required=True, help="the ember binary")
    parser.add_argument("--kills", type=int, default=300,
                        help="kills to make in all (trials continue until there are this many)")
    parser.add_argument("--max_kills_per_trial", type=int, default=5,
                        help="a trial's job is killed 1..this many times before it may finish")
    parser.add_argument("--modes", default=",".join(MODES),
                        help="comma-separated modes: " + ", ".join(MODES))
    parser.add_argument("--rows", type=int, default=16000, help="examples of the generated data")
    parser.add_argument("--batch_size", type=int, default=128)
    parser.add_argument("--checkpoint_every_steps", type=int, default=9)
    parser.add_argument("--seed", type=int, default=1, help="seeds the kills and the data")
    parser.add_argument("--work_dir", default="",
                        help="where jobs write (default: a temporary directory, removed after)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    args.modes = [m for m in args.modes.split(",") if m]
    for mode in args.modes:
        if mode not in MODES:
            parser.error(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    if args.kills < 1 or args.max_kills_per_trial < 1:
        parser.error("--kills and --max_kills_per_trial must be >= 1")
    return args


class Crashtest:
    def __init__(self, args, work):
        self.args = args
        self.work = work
        self.rng = random.Random(args.seed)
        self.data = os.path.join(work, "data.tsv")
        self.reference = {}  # mode -> (model hash, seconds)
        self.counts = {"sigkill": 0, "sigterm": 0, "point": 0}
        self.points_fired = {p: 0 for p in CRASH_POINTS}
        self.points_asked = {p: 0 for p in CRASH_POINTS}
        self.runs = 0
        self.trials = 0
        self.equal = 0
        self.different = 0
        self.failed = 0
        self.failures = []

    def command(self, mode, job_dir, metrics):
        cmd = [self.args.ember, "train", "--train_data=" + self.data, "--plan=off", "--threads=2",
               f"--batch_size={self.args.batch_size}", "--model_hash",
               "--metrics_out=" + metrics] + MODES[mode]
        if job_dir is not None:
            cmd += ["--checkpoint_dir=" + os.path.join(job_dir, "checkpoint"),
                    f"--checkpoint_every_steps={self.args.checkpoint_every_steps}"]
            if "disk" in mode:
                cmd.append("--embedding_dir=" + os.path.join(job_dir, "tier"))
        return cmd

    def run(self, cmd, log_path, env=None, kill_after=None, kill_signal=None, timeout=120):
        """Runs cmd; sends kill_signal after kill_after seconds. Returns (exit status, log)."""
        self.runs += 1
        with open(log_path, "w") as log:
            process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
            try:
                if kill_after is not None:
                    try:
                        process.wait(timeout=kill_after)
                    except subprocess.TimeoutExpired:
                        process.send_signal(kill_signal)
                status = process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                status = "hang"
        with open(log_path, errors="replace") as log:
            return status, log.read()

    @staticmethod
    def model_hash(metrics):
        try:
            with open(metrics) as f:
                return json.load(f)["train"]["model_hash"]
        except (OSError, ValueError, KeyError) as error:
            return f"unreadable ({error})"

    def prepare(self):
        status, log = self.run([self.args.ember, "gen-data", "--out=" + self.data,
                                f"--rows={self.args.rows}", f"--seed={self.args.seed}"],
                               os.path.join(self.work, "gen-data.log"))
        if status != 0:
            sys.exit(f"crashtest: gen-data failed ({status}):\n{log[-3000:]}")
        for mode in self.args.modes:
            metrics = os.path.join(self.work, f"reference-{mode}.json")
            start = time.monotonic()
            job = os.path.join(self.work, f"reference-{mode}")
            status, log = self.run(self.command(mode, job, metrics),
                                   os.path.join(self.work, f"reference-{mode}.log"))
            seconds = time.monotonic() - start
            if status != 0:
                sys.exit(f"crashtest: the uninterrupted {mode} run failed ({status}):\n{log[-3000:]}")
            self.reference[mode] = (self.model_hash(metrics), seconds)
            print(f"crashtest: reference {mode}: model hash {self.reference[mode][0]}, "
                  f"{seconds:.1f} s", flush=True)

    def fail(self, what, log):
        self.failed += 1
        self.failures.append(what)
        print(f"  FAILED: {what}\n" + "\n".join("    " + l for l in log.splitlines()[-15:]),
              flush=True)

    def trial(self, kills_left):
        mode = self.args.modes[self.trials % len(self.args.modes)]
        self.trials += 1
        job = os.path.join(self.work, f"trial-{self.trials}")
        os.makedirs(job)
        metrics = os.path.join(job, "metrics.json")
        cmd = self.command(mode, job, metrics)
        reference_hash, seconds = self.reference[mode]
        timeout = 30 + 10 * seconds
        kills = min(kills_left, self.rng.randint(1, self.args.max_kills_per_trial))
        events = []
        points = [p for p in CRASH_POINTS if "disk" in mode or p not in DISK_POINTS]
        made = 0
        for attempt in range(kills):
            kind = self.rng.choice(["sigkill", "sigterm", "point"])
            env = dict(os.environ)
            kill_after = kill_signal = None
            if kind == "point":
                point = self.rng.choice(points)
                # Early checkpoints are reached by every run, later ones only
                # by runs that resumed early: mostly small counts. A restarted
                # run creates its tier once (a fresh one twice).
                nth = 1 if point in DISK_POINTS else self.rng.choice([1, 1, 2, 2, 3, 5, 8])
                env["EMBER_CRASH_POINT"] = f"{point}@{nth}"
                self.points_asked[point] += 1
                label = f"{point}@{nth}"
            else:
                kill_signal = signal.SIGKILL if kind == "sigkill" else signal.SIGTERM
                kill_after = self.rng.uniform(0.0, seconds)
                label = f"{kind} at {kill_after:.2f}s"
            log_path = os.path.join(job, f"run-{attempt}.log")
            status, log = self.run(cmd, log_path, env, kill_after, kill_signal, timeout)
            if status == 0:
                events.append(label + " (finished first)")
                break
            if status == "hang":
                self.fail(f"trial {self.trials} ({mode}): run {attempt} hung ({label})", log)
                return
            killed = (status == -signal.SIGKILL or
                      (kind == "sigterm" and status in (SIGTERM_STOPPED, -signal.SIGTERM)))
            if not killed:
                self.fail(f"trial {self.trials} ({mode}): run {attempt} exited {status} ({label})",
                          log)
                return
            if kind == "point":
                if "killed at crash point " + point not in log:
                    self.fail(f"trial {self.trials}: {label} killed without its message", log)
                    return
                self.points_fired[point] += 1
            self.counts[kind] += 1
            made += 1
            events.append(label + (" (stopped)" if status == SIGTERM_STOPPED else ""))
        # The job runs to its end: as many restarts as it takes (a run that
        # never finishes is a hang).
        status, log = self.run(cmd, os.path.join(job, "final.log"), timeout=timeout)
        if status != 0:
            self.fail(f"trial {self.trials} ({mode}): the final run exited {status}", log)
            return
        got = self.model_hash(metrics)
        verdict = "equal" if got == reference_hash else f"DIFFERENT ({got} != {reference_hash})"
        if got == reference_hash:
            self.equal += 1
        else:
            self.different += 1
            self.failures.append(f"trial {self.trials} ({mode}): model {got}, expected "
                                 f"{reference_hash}; kept in {job}")
        print(f"crashtest: trial {self.trials} {mode}: {'; '.join(events)}; {verdict}", flush=True)
        if got == reference_hash and not self.args.keep:
            shutil.rmtree(job, ignore_errors=True)
        return made

    def main(self):
        self.prepare()
        total_kills = 0
        while total_kills < self.args.kills:
            made = self.trial(self.args.kills - total_kills)
            total_kills += made or 0
            if made is None and self.failed > 20:
                break
            if made == 0 and self.trials > 10 * self.args.kills:
                break
        kinds = ", ".join(f"{n} {k}" for k, n in self.counts.items())
        print(f"crashtest: {self.trials} trials, {total_kills} kills ({kinds}), "
              f"{self.runs - 1 - len(self.args.modes)} runs of trials; "
              f"{self.equal} equal, {self.different} different, {self.failed} failed")
        print("crashtest: crash points reached: " +
              ", ".join(f"{p} {self.points_fired[p]}/{self.points_asked[p]}" for p in CRASH_POINTS))
        unreached = [p for p in CRASH_POINTS if self.points_asked[p] > 0 and self.points_fired[p] == 0]
        for p in unreached:
            self.failures.append(f"crash point {p} was asked for {self.points_asked[p]} times and "
                                 "never reached")
        for failure in self.failures:
            print("crashtest: " + failure)
        return 0 if not self.failures else 1


def main():
    args = parse_args()
    work = args.work_dir or tempfile.mkdtemp(prefix="ember-crashtest-")
    os.makedirs(work, exist_ok=True)
    try:
        code = Crashtest(args, work).main()
    finally:
        if not args.keep and not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    if args.keep or args.work_dir:
        print(f"crashtest: jobs kept in {work}")
    return code


if __name__ == "__main__":
    sys.exit(main())
