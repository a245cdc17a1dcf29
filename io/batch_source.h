#pragma once

// BatchSource: the batches a training or evaluation loop consumes, whatever
// holds them: a Dataset in memory (DatasetBatchSource, below) or files read
// in a stream (StreamReader, io/stream_reader.h).

#include <cstdint>
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

 private:
  const Dataset& data_;
  const DatasetBatchSourceOptions options_;
  int64_t epoch_ = -1;
  int64_t next_ = 0;  // First example of the next batch in the epoch's order.
  std::vector<int64_t> order_;
  std::vector<int64_t> indices_;
};

}  // namespace ember::io
