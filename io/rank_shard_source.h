#pragma once

// Rank r's batches of a job of n ranks training one model from examples in
// memory (issue 62), from only this rank's share of them: the batches that
// RankSliceBatchSource would cut from a DatasetBatchSource over all the
// examples (rank r gets rows [r b / n, (r + 1) b / n) of each global batch of
// b rows, the same global batches and epochs, shuffled or not), while each
// rank holds about 1/n of the examples instead of all of them.
//
// The examples are a partition: every example is held by exactly one rank at
// any time. At the start of each epoch every rank draws that epoch's order
// (the permutation DatasetBatchSource draws from (seed, epoch)), which makes
// each example's position, and so the rank whose slice holds it; the ranks
// then swap the examples whose rank changes (one AllToAllV per column over
// `comm`): with shuffling about (n-1)/n of the data moves once an epoch,
// without it nothing moves after the first epoch. Paddle's InMemoryDataset
// moves data between trainers the same way (global_shuffle). Each rank also
// keeps the epoch's order, 8 bytes an example (and 8 more while it swaps).
//
// Thread safety: one thread at a time (the reader's), which is also the only
// user of `comm`.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/communicator.h"
#include "io/batch_source.h"
#include "io/dataset.h"

namespace ember::io {

// The shape of every example (a rank's share may be empty).
struct ExampleShape {
  int num_dense = 0;
  int num_slots = 0;
  int num_labels = 1;
};

class RankShardBatchSource final : public BatchSource {
 public:
  // `share` holds this rank's examples: those whose index in the whole data
  // of `examples` examples is in `indices` (share's example j is example
  // indices[j]); the ranks' indices are a partition of [0, examples).
  // `global` are the options of the whole job's source (its batch_size is the
  // global batch, n x each rank's). `comm` is borrowed, a group of the job's
  // n ranks used by this source alone, and must outlive it. InvalidArgument
  // if indices and share differ in size, an index is out of range, the share
  // has another shape, or the options are invalid. Other ranks' mistakes
  // (overlapping or missing indices) are found at the first epoch's swap.
  static Result<std::unique_ptr<RankShardBatchSource>> Make(
      Dataset share, std::vector<int64_t> indices, int64_t examples, ExampleShape shape,
      const DatasetBatchSourceOptions& global, Communicator* comm);

  Result<bool> Next(Batch* out) override;
  int64_t epoch() const override { return epoch_; }
  int64_t EstimatedBatches() const override;
  int num_labels() const override { return shape_.num_labels; }
  int num_dense() const override { return shape_.num_dense; }
  int num_slots() const override { return shape_.num_slots; }
  // The position of the whole job's DatasetBatchSource (the same text on
  // every rank, and as one rank would write it): a checkpoint of n ranks
  // resumes here, or on one rank, or on another number of ranks.
  Result<std::string> ResumePosition() const override;
  // Swaps examples for the position's epoch: a collective, every rank must
  // resume at the same position.
  Status ResumeFrom(std::string_view position) override;
  // This rank's share, as it is now (in this epoch's slice order).
  const Dataset* InMemoryData() const override { return &held_; }

  // Examples this rank holds now.
  int64_t held_examples() const { return held_.size(); }

 private:
  RankShardBatchSource(Dataset share, std::vector<int64_t> indices, int64_t examples,
                       ExampleShape shape, const DatasetBatchSourceOptions& global,
                       Communicator* comm);
  // Swaps examples so that this rank holds the examples of its slices of
  // epoch `epoch` from position `start` on (those before stay where they
  // are), in slice order, and sets used_ to how many of them there are.
  Status PlaceEpoch(int64_t epoch, int64_t start);
  // The rank whose slice holds position p of an epoch whose batches start at
  // `start` (p >= start).
  int OwnerOf(int64_t p, int64_t start) const;

  Dataset held_;                 // In slice order: the used_ examples of this epoch first.
  std::vector<int64_t> indices_;  // Per held example: its index in the whole data.
  const int64_t examples_;
  const ExampleShape shape_;
  const DatasetBatchSourceOptions options_;
  Communicator* const comm_;
  const int rank_;
  const int ranks_;
  int64_t epoch_ = -1;
  int64_t next_ = 0;        // Position (in the epoch's order) of the next global batch.
  int64_t start_ = 0;       // Where this epoch's batches start (a resumed epoch: not 0).
  int64_t local_next_ = 0;  // The next of held_'s examples to return.
  int64_t placed_start_ = -1;  // The start held_ was last placed for.
  int64_t used_ = 0;
};

// Every rank's `mine` on every rank, in the order of their indices in the
// whole data (`indices[j]` is the index of mine's example j): the held-out
// examples, which every rank evaluates, when each rank read a share. Keeps
// mine's bad-line report. A collective over `comm`; InvalidArgument if
// indices and mine differ in size.
Result<Dataset> AllGatherExamples(Communicator& comm, const Dataset& mine,
                                  const std::vector<int64_t>& indices, ExampleShape shape);

}  // namespace ember::io
