#pragma once

// Checkpoints of a job that several ranks train together (issue 31):
//
//   dir/rank-<r>/   rank r's checkpoints (engine/training_checkpoint.h): the
//                   rows it owns, the dense state (the same on every rank)
//                   and the position of its data
//   dir/RANKS       {"format": "ember-ranks", "version": 1, "ranks": N,
//                   "step": S}: written last, atomically, by rank 0 once
//                   every rank has saved step S
//
// RANKS is the commit: the job's checkpoint is the one of the step it names,
// whole on every rank. A save that not every rank finished (a rank died in
// it) is newer than RANKS' step; a restore sets it aside (RestoreAt).
//
// Resuming on another number of ranks M (elastic): each new rank reads every
// old rank's rows of step S and keeps those it owns among M
// (embedding::KeyOwner), so the rows of the job are the same set after
// resharding; the dense state is any old rank's; the data position is moved
// to the new global batch when the data is in memory (every rank reads the
// whole data: io/rank_slice_source.h); streamed data, whose positions are
// per shard, resumes from all N old shards' positions, the M ranks reading
// the rest of their epoch together (io/elastic_stream_source.h). Every rank
// reads every old rank's directory: a file system that all ranks see.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/dir_lock.h"
#include "core/status.h"

namespace ember::engine {

// "<dir>/rank-<rank>".
std::string RankCheckpointDir(const std::string& dir, int rank);

// The job's checkpoint: what RANKS says, or the checkpoint of one process
// that trained without ranks (in `dir` itself: it resumes on any number of
// ranks as one old rank).
struct RanksRecord {
  int ranks = 0;
  int64_t step = 0;
  bool unranked = false;  // `dir` itself holds the one old rank's checkpoint.
};

// Whether `dir` has a RANKS file (a job of ranks wrote it).
bool HasRanksRecord(const std::string& dir);

// Reads <dir>/RANKS; without one, the newest checkpoint that one process
// wrote in `dir` (unranked). NotFound when there is neither; DataLoss naming
// the file when RANKS is not one.
Result<RanksRecord> FindRanksCheckpoint(const std::string& dir);

// Where old rank `rank` of `record` keeps its checkpoint.
std::string RecordedRankDir(const std::string& dir, const RanksRecord& record, int rank);

// One writer per checkpoint directory (core/dir_lock.h): locks what this
// rank writes of the job's checkpoints in `dir` — `dir` itself for rank 0
// (it writes RANKS, and the one process of a job without ranks writes its
// checkpoints there), and RankCheckpointDir(dir, rank) when `ranks_layout`.
// So a second job on `dir` is refused by whichever of its ranks comes first,
// before anything is read or written. FailedPrecondition naming the
// directory and the holder when another job has it.
Result<std::vector<std::unique_ptr<DirectoryLock>>> LockCheckpointDirectories(
    const std::string& dir, int rank, bool ranks_layout);

// After every rank saved the checkpoint of `step` in its RankCheckpointDir:
// waits for all (a collective on `control`), rank 0 writes RANKS, and every
// rank waits for that. An error on any rank fails the others (naming it).
// `control` null: a job of one process, which writes RANKS itself.
Status CommitRanksCheckpoint(Communicator* control, const std::string& dir, int64_t step);

}  // namespace ember::engine
