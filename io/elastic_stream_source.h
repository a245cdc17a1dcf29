#pragma once

// Streamed training data of rank `rank` of `ranks` (shard rank of ranks of
// the files, io/stream_reader.h) that can also resume from the positions of
// a job that streamed the same files on another number of ranks N (issue
// 57): a checkpoint of N ranks resumes on M.
//
// The N old shards stopped at the same batch of the same epoch e (equal
// shards: each returns T_e records in e, and the ranks step together). What
// is left of e is the rest of the N old shards; it is read as the N old
// shards would have read it, each old shard from its saved position (its
// shuffle buffer rebuilt as Seek does), and each step's N old batches, in
// old rank order, make one global batch of which rank s of M takes rows
// [s·G/M, (s+1)·G/M) (RankSliceBatchSource's rule). So between them the M
// ranks train every example of e that the N had not trained, once, in the
// steps the N would have trained them in (the global batches are the same);
// every rank reads all N old shards for the rest of that epoch. From epoch
// e + 1 on, rank s reads shard s of M as a fresh job of M ranks would.
//
// Positions: while the old shards are read, ResumePosition is a resharded
// position ({"resharded_stream": [old shard 0's position, ...]}), which this
// source on any number of ranks resumes from; afterwards it is shard s of
// M's own StreamPosition. ResumeFrom takes either.
//
// Thread safety: one thread at a time.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "io/batch_source.h"
#include "io/stream_reader.h"

namespace ember::io {

// Opens shard `shard_index` of `num_shards` of the job's files, with the
// job's reader options for that many shards.
using StreamShardOpener =
    std::function<Result<std::unique_ptr<StreamReader>>(int shard_index, int num_shards)>;

// The resharded position of a job of N ranks, from each old rank's
// position in rank order: StreamPositions of shards 0..N-1 of N (at the same
// epoch and batch), or the same resharded position on every rank (a job that
// was itself resuming one). InvalidArgument naming the rank and field when
// they are neither.
Result<std::string> ReshardedStreamPosition(const std::vector<std::string>& rank_positions);

class ElasticStreamSource final : public BatchSource {
 public:
  // `main` is shard `rank` of `ranks` (borrowed: it outlives this source);
  // `open` opens the old shards of a resharded position.
  ElasticStreamSource(StreamReader* main, StreamShardOpener open, int rank, int ranks);
  ~ElasticStreamSource() override;

  Result<bool> Next(Batch* out) override;
  int64_t epoch() const override;
  int64_t EstimatedBatches() const override { return main_->EstimatedBatches(); }
  int num_labels() const override { return main_->num_labels(); }
  int num_dense() const override { return main_->num_dense(); }
  int num_slots() const override { return main_->num_slots(); }
  Result<std::string> ResumePosition() const override;
  // A position of shard rank of ranks, or a resharded one. InvalidArgument
  // for a position of another shard count that is not resharded.
  Status ResumeFrom(std::string_view position) override;

  // Examples this rank took from the old shards (the rest of their epoch).
  int64_t resharded_records() const { return resharded_records_; }

 private:
  // Starts the main reader at the start of `epoch` (nothing of it read).
  Status StartMainAt(int64_t epoch);

  StreamReader* main_;
  StreamShardOpener open_;
  const int rank_;
  const int ranks_;
  // While the rest of the old shards' epoch is read: those shards and the
  // epoch.
  std::vector<std::unique_ptr<StreamReader>> old_;
  int64_t old_epoch_ = -1;
  int64_t last_epoch_ = -1;
  int64_t resharded_records_ = 0;
  Batch part_, global_;
};

}  // namespace ember::io
