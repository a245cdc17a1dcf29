#pragma once

// Crash points: named places where a crash test may kill the process, as
// RocksDB's kill points. A place that must survive a crash at that exact
// moment (between two writes of a checkpoint, between a database's creation
// and its column family's) calls CrashPoint("name"); nothing happens unless
// the process was asked to crash there, so the points stay in every build.
//
// Asking: the environment variable EMBER_CRASH_POINT=NAME kills the process
// with SIGKILL the first time it reaches NAME; NAME@N the N-th time (N >= 1).
// The variable is read once, at the first CrashPoint call. Under mpirun,
// where every rank has the same environment, EMBER_CRASH_RANK=R arms it in
// rank R (OMPI_COMM_WORLD_RANK; 0 without mpirun) only. tools/crashtest
// sets it in the jobs it kills; tests call SetCrashPointForTest in the child
// of a death test.
//
// The points: "tier.created_database" (embedding/rocksdb_tier.cc),
// "checkpoint.dense_written" (engine/training_checkpoint.cc),
// "checkpoint.snapshot_files", "checkpoint.snapshot_manifest" and
// "checkpoint.snapshot_renamed" (embedding/checkpoint.cc); in the commit of
// a job of ranks (engine/rank_checkpoint.cc) "ranks.saved" (this rank saved,
// the others maybe not), "ranks.all_saved" (every rank saved, RANKS not yet
// written) and "ranks.committed" (rank 0 wrote RANKS, the others not told). tools/crashtest
// names them too, and fails when one it asks for is never reached.
//
// Thread safety: CrashPoint may be called from any thread.

#include <string>

namespace ember {

void CrashPoint(const char* name);

// Replaces the requested point ("NAME" or "NAME@N"; empty: none), as the
// environment variable would have set it. For tests.
void SetCrashPointForTest(const std::string& spec);

}  // namespace ember
