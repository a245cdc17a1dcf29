#pragma once

// BatchSource: the batches a training or evaluation loop consumes, whatever
// holds them: a Dataset in memory (DatasetBatchSource, below) or files read
// in a stream (StreamReader, io/stream_reader.h).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "io/batch.h"
#include "io/dataset.h"

namespace ember::io {

// Thread safety: one thread at a time.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Fills `out` (capacity kept) with the next batch and returns true; false
  // after the last one. Batches never span epochs.
  virtual Result<bool> Next(Batch* out) = 0;
  // The epoch of the last batch Next returned (-1 before the first).
  virtual int64_t epoch() const = 0;
  // Batches Next will return in all, when known in advance; otherwise an
  // estimate (for progress and ETA), or -1 when there is none.
  virtual int64_t EstimatedBatches() const = 0;
  // Labels, dense features and slots per example.
  virtual int num_labels() const = 0;
  virtual int num_dense() const = 0;
  virtual int num_slots() const = 0;

  // Resume. ResumePosition() says where the source is, between two calls of
  // Next, as a string that ResumeFrom on a source over the same data with
  // the same options turns back into the same stream: the batches after it
  // are the ones this source would return next. A training checkpoint keeps
  // it so that a resumed job goes on without reading again the batches it
  // had trained. Unimplemented (the default) when the source cannot say; the
  // trainer then reads and drops those batches.
  virtual Result<std::string> ResumePosition() const;
  // InvalidArgument naming what differs when the position belongs to other
  // data or options, or is not one ResumePosition wrote.
  virtual Status ResumeFrom(std::string_view position);

  // The examples in memory this source reads its batches from (all of them,
  // whatever part it returns), or nullptr (the default) when it reads a
  // stream. A trainer sizes its table from them.
  virtual const Dataset* InMemoryData() const { return nullptr; }
};

struct DatasetBatchSourceOptions {
  int64_t batch_size = 1024;
  int64_t num_epochs = 1;
  // Permute the examples in every epoch, by (seed, epoch).
  bool shuffle = false;
  uint64_t seed = 1;
};

// Batches of a Dataset in memory: in order, or in a fresh permutation of all
// examples every epoch; the last batch of an epoch may be short.
class DatasetBatchSource final : public BatchSource {
 public:
  // `data` is borrowed and must outlive the source.
  // REQUIRES: batch_size >= 1, num_epochs >= 0.
  DatasetBatchSource(const Dataset& data, const DatasetBatchSourceOptions& options);

  Result<bool> Next(Batch* out) override;
  int64_t epoch() const override { return epoch_; }
  int64_t EstimatedBatches() const override;
  int num_labels() const override { return data_.num_labels(); }
  int num_dense() const override { return data_.num_dense(); }
  int num_slots() const override { return data_.num_slots(); }
  // {"dataset": examples, "batch_size", "shuffle", "seed", "epoch", "next"}:
  // an epoch's order is a function of (seed, epoch), so a position is where
  // the next batch starts in it.
  Result<std::string> ResumePosition() const override;
  Status ResumeFrom(std::string_view position) override;
  const Dataset* InMemoryData() const override { return &data_; }

 private:
  // Draws the order of `epoch_` when shuffling.
  void OrderEpoch();

  const Dataset& data_;
  const DatasetBatchSourceOptions options_;
  int64_t epoch_ = -1;
  int64_t next_ = 0;  // First example of the next batch in the epoch's order.
  std::vector<int64_t> order_;
  std::vector<int64_t> indices_;
};

// The position `position` of a DatasetBatchSource (its ResumePosition) for
// the same data in batches of `batch_size`: an epoch's order depends on the
// seed and the epoch, not on the batch size, so the examples after it are
// the same. For a job resumed with another global batch (engine/
// rank_checkpoint.h). InvalidArgument when `position` is not one of a
// DatasetBatchSource or batch_size < 1.
Result<std::string> RebatchDatasetPosition(std::string_view position, int64_t batch_size);

}  // namespace ember::io
