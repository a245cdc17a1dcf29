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
RocksDB); and jobs of ranks under mpirun (--modes=ranks): 2 and 3 ranks,
sequential, pipelined, pipeline-parallel and with the disk tier. In a job of
ranks the kill goes to one rank, chosen at random: the job's ranks are the
processes of the launcher's session (mpirun is started in a session of its
own) that carry OMPI_COMM_WORLD_RANK, so the launcher itself is never taken
for one; a crash point is armed in one rank (EMBER_CRASH_RANK), among them
the ranks' commit (ranks.saved, ranks.all_saved, ranks.committed). Prints one
line per trial and a summary:

  crashtest: 40 trials, 300 kills (...), 345 runs; 40 equal, 0 different, 0 failed

and exits 1 if any job ended with another model ("different"), any run
failed otherwise (an unexpected exit status, a hang, a sanitizer report), or
a crash point that was asked for was never reached.

Small runs (part of the test suite): crashtest.py --ember=build/tools/ember --kills=40
                                     crashtest.py --ember=build/tools/ember --modes=ranks --kills=12
Long runs (300 and 200 kills):       crashtest.py --ember=build/tools/ember --kills=300
                                     crashtest.py --ember=build/tools/ember --modes=ranks --kills=200
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
    "ranks.saved",                 # this rank saved, the others maybe not
    "ranks.all_saved",             # every rank saved, RANKS not yet written
    "ranks.committed",             # rank 0 wrote RANKS, the other ranks not yet told
]
DISK_POINTS = {"tier.created_database"}
RANKS_POINTS = {"ranks.saved", "ranks.all_saved", "ranks.committed"}

# Mode: (ranks, flags). Ranks 0: one process without mpirun.
MODES = {
    "sequential": (0, ["--pipeline=off"]),
    "pipelined": (0, ["--pipeline=on"]),
    "sequential-disk": (0, ["--pipeline=off", "--embedding_memory_budget=1MB"]),
    "pipelined-disk": (0, ["--pipeline=on", "--embedding_memory_budget=1MB"]),
    "ranks2-sequential": (2, ["--pipeline=off"]),
    "ranks3-pipelined": (3, ["--pipeline=on"]),
    "ranks2-pipeline-parallel": (2, ["--pipeline_parallel=2", "--micro_batches=2"]),
    "ranks2-disk": (2, ["--pipeline=on", "--embedding_memory_budget=1MB"]),
}
MODE_GROUPS = {
    "single": [m for m, (ranks, _) in MODES.items() if ranks == 0],
    "ranks": [m for m, (ranks, _) in MODES.items() if ranks > 0],
}
MODE_GROUPS["all"] = MODE_GROUPS["single"] + MODE_GROUPS["ranks"]

SIGTERM_STOPPED = 128 + signal.SIGTERM  # ember train's exit after a graceful stop


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ember", required=True, help="the ember binary")
    parser.add_argument("--kills", type=int, default=300,
                        help="kills to make in all (trials continue until there are this many)")
    parser.add_argument("--max_kills_per_trial", type=int, default=5,
                        help="a trial's job is killed 1..this many times before it may finish")
    parser.add_argument("--modes", default="single",
                        help="comma-separated modes or groups (single, ranks, all): " +
                             ", ".join(MODES))
    parser.add_argument("--elastic_fraction", type=float, default=0.3,
                        help="jobs of ranks: the share of trials whose committed checkpoint is "
                             "also resumed on another number of ranks (1-3) and compared")
    parser.add_argument("--mpirun", default=shutil.which("mpirun") or "mpirun",
                        help="the launcher of jobs of ranks")
    parser.add_argument("--rows", type=int, default=16000, help="examples of the generated data")
    parser.add_argument("--batch_size", type=int, default=128)
    parser.add_argument("--checkpoint_every_steps", type=int, default=9)
    parser.add_argument("--seed", type=int, default=1, help="seeds the kills and the data")
    parser.add_argument("--work_dir", default="",
                        help="where jobs write (default: a temporary directory, removed after)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    modes = []
    for mode in (m for m in args.modes.split(",") if m):
        if mode in MODE_GROUPS:
            modes += MODE_GROUPS[mode]
        elif mode in MODES:
            modes.append(mode)
        else:
            parser.error(f"unknown mode {mode!r}; choose from {', '.join(MODE_GROUPS)}, "
                         f"{', '.join(MODES)}")
    args.modes = modes
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
        self.elastic_checks = 0

    def command(self, mode, job_dir, metrics):
        ranks, flags = MODES[mode]
        launcher = []
        threads = "--threads=2"
        if ranks > 0:
            launcher = [self.args.mpirun, "--allow-run-as-root", "--oversubscribe", "-np",
                        str(ranks)]
            threads = "--threads=1"
            flags = flags + ["--rank_timeout_seconds=20"]
        cmd = launcher + [self.args.ember, "train", "--train_data=" + self.data, "--plan=off",
                          threads, f"--batch_size={self.args.batch_size}", "--model_hash",
                          "--metrics_out=" + metrics] + flags
        if job_dir is not None:
            cmd += ["--checkpoint_dir=" + os.path.join(job_dir, "checkpoint"),
                    f"--checkpoint_every_steps={self.args.checkpoint_every_steps}"]
            if "disk" in mode:
                cmd.append("--embedding_dir=" + os.path.join(job_dir, "tier"))
        return cmd

    @staticmethod
    def ranks_of(session):
        """{rank: pid} of the ember processes in `session` (a launcher's)."""
        ranks = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == session:
                continue
            pid = int(entry)
            try:
                if os.getsid(pid) != session:
                    continue
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = f.read().split(b"\0")
            except OSError:
                continue
            for var in env:
                if var.startswith(b"OMPI_COMM_WORLD_RANK="):
                    ranks[int(var.split(b"=", 1)[1])] = pid
        return ranks

    def run(self, cmd, log_path, env=None, kill_after=None, kill_signal=None, timeout=120,
            kill_rank=None):
        """Runs cmd; sends kill_signal after kill_after seconds (to rank `kill_rank` of a job of
        ranks). Returns (exit status, log)."""
        self.runs += 1
        ranked = kill_rank is not None
        with open(log_path, "w") as log:
            process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                       start_new_session=True)
            try:
                if kill_after is not None:
                    try:
                        process.wait(timeout=kill_after)
                    except subprocess.TimeoutExpired:
                        if not ranked:
                            process.send_signal(kill_signal)
                        else:
                            pid = self.ranks_of(process.pid).get(kill_rank)
                            if pid is not None:
                                os.kill(pid, kill_signal)
                status = process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                status = "hang"
                # Where each process of the run waits, for the report.
                ps = subprocess.run(["ps", "-o", "pid,stat,wchan:32,args", "-s",
                                     str(process.pid)], capture_output=True, text=True)
                log.write("crashtest: hung processes:\n" + ps.stdout)
                log.flush()
            # Nothing of the run outlives it: a rank left behind is a failure too.
            left = self.ranks_of(process.pid)
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except OSError:
                pass
            process.wait()
            if left and status != "hang":
                status = f"left ranks {sorted(left)} running"
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
        ranks, flags = MODES[mode]
        # A pipeline's checkpoints are rank 0's alone: no commit of ranks.
        ranks_commit = ranks > 0 and not any(f.startswith("--pipeline_parallel") for f in flags)
        points = [p for p in CRASH_POINTS
                  if ("disk" in mode or p not in DISK_POINTS) and
                  (ranks_commit or p not in RANKS_POINTS)]
        made = 0
        for attempt in range(kills):
            kind = self.rng.choice(["sigkill", "sigterm", "point"])
            env = dict(os.environ)
            kill_after = kill_signal = None
            rank = self.rng.randrange(ranks) if ranks > 0 else None
            who = f" of rank {rank}" if rank is not None else ""
            if rank is not None:
                env["EMBER_CRASH_RANK"] = str(rank)
            if kind == "point":
                point = self.rng.choice(points)
                # Early checkpoints are reached by every run, later ones only
                # by runs that resumed early: mostly small counts. A restarted
                # run creates its tier once (a fresh one twice).
                # Jobs of ranks save fewer checkpoints a run (every rank's
                # global batch is larger): earlier saves.
                later = [3, 5, 8] if ranks == 0 else [3]
                nth = 1 if point in DISK_POINTS else self.rng.choice([1, 1, 2, 2] + later)
                env["EMBER_CRASH_POINT"] = f"{point}@{nth}"
                self.points_asked[point] += 1
                label = f"{point}@{nth}{who}"
            else:
                kill_signal = signal.SIGKILL if kind == "sigkill" else signal.SIGTERM
                kill_after = self.rng.uniform(0.0, seconds)
                label = f"{kind}{who} at {kill_after:.2f}s"
            log_path = os.path.join(job, f"run-{attempt}.log")
            status, log = self.run(cmd, log_path, env, kill_after, kill_signal, timeout, rank)
            if status == 0:
                events.append(label + " (finished first)")
                break
            if not isinstance(status, int):
                self.fail(f"trial {self.trials} ({mode}): run {attempt}: {status} ({label})", log)
                return
            if ranks > 0:
                # mpirun ends the job when a rank dies or fails, with its own status.
                killed = (kind != "point" and status != 0) or "killed at crash point" in log
            else:
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
        # Elastic: the committed checkpoint of a job of ranks, resumed on
        # another number of ranks without training, holds the same rows
        # (keys, vectors, optimizer state) and dense state as on its own.
        if ranks_commit and self.rng.random() < self.args.elastic_fraction:
            verdict = self.elastic(mode, job, cmd, timeout)
            if verdict is None:
                return
            events.append(verdict)
        # The job runs to its end: as many restarts as it takes (a run that
        # never finishes is a hang).
        status, log = self.run(cmd, os.path.join(job, "final.log"), timeout=timeout,
                               kill_rank=0 if ranks > 0 else None)
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

    @staticmethod
    def printed_hash(log):
        for line in log.splitlines():
            if line.startswith("model hash: "):
                return line[len("model hash: "):].strip()
        return None

    def elastic(self, mode, job, cmd, timeout):
        """Resumes the job's committed checkpoint on its own and on another number of ranks,
        training nothing; returns the event's text, or None after a failure."""
        try:
            with open(os.path.join(job, "checkpoint", "RANKS")) as f:
                step = json.load(f)["step"]
        except (OSError, ValueError, KeyError):
            return "elastic: nothing committed yet"
        ranks = MODES[mode][0]
        other = self.rng.choice([r for r in (1, 2, 3) if r != ranks])
        np_at = cmd.index("-np") + 1
        hashes = {}
        for n in (ranks, other):
            run_cmd = list(cmd)
            if n == 1:
                run_cmd = run_cmd[np_at + 1:]  # One process, without mpirun.
            else:
                run_cmd[np_at] = str(n)
            run_cmd = [a for a in run_cmd if not a.startswith("--metrics_out")]
            run_cmd += [f"--max_steps={step}"]
            status, log = self.run(run_cmd, os.path.join(job, f"elastic-{n}.log"),
                                   timeout=timeout, kill_rank=0 if n > 1 else None)
            hashes[n] = self.printed_hash(log)
            if status != 0 or hashes[n] is None:
                self.fail(f"trial {self.trials} ({mode}): the resume of step {step} on {n} ranks "
                          f"exited {status}", log)
                return None
        if hashes[ranks] != hashes[other]:
            self.different += 1
            self.failures.append(f"trial {self.trials} ({mode}): step {step} on {other} ranks: "
                                 f"model {hashes[other]}, on {ranks}: {hashes[ranks]}; kept in {job}")
            return f"elastic {ranks} -> {other} ranks at step {step}: DIFFERENT"
        self.elastic_checks += 1
        return f"elastic {ranks} -> {other} ranks at step {step}: same rows"

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
              f"{self.equal} equal, {self.different} different, {self.failed} failed; "
              f"{self.elastic_checks} elastic resumes with the same rows")
        print("crashtest: crash points reached: " +
              ", ".join(f"{p} {self.points_fired[p]}/{self.points_asked[p]}" for p in CRASH_POINTS))
        # A point asked for twice or more and never reached is not where the
        # code is (a run resumed late may end before a single ask is reached).
        unreached = [p for p in CRASH_POINTS if self.points_asked[p] > 1 and self.points_fired[p] == 0]
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
