#pragma once

// What the sources of in-memory data (io/batch_source.h's DatasetBatchSource,
// io/rank_shard_source.h) share: an epoch's order of the examples and the
// position text a checkpoint keeps. Internal to io/.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "io/batch_source.h"

namespace ember::io::internal {

// Where a source of in-memory data is (its ResumePosition): its data's size,
// its batches and order, and the epoch and the example (in the epoch's order)
// it reads next. Before the first batch: epoch -1, next = dataset.
struct DatasetPosition {
  int64_t dataset = 0;
  int64_t batch_size = 0;
  bool shuffle = false;
  uint64_t seed = 0;
  int64_t epoch = 0;
  int64_t next = 0;
};

// One line of JSON, as positions have been written from the start.
std::string DatasetPositionText(const DatasetPosition& position);
// InvalidArgument when `text` is not a position DatasetPositionText wrote.
Result<DatasetPosition> ParseDatasetPosition(std::string_view text);

// The position `text` for a source of `examples` examples read with
// `options`, checked (InvalidArgument naming what differs: the data's size,
// the batch size, the order, or a place outside the data) and clamped: a
// position past the source's last epoch becomes the end of that epoch.
Result<DatasetPosition> CheckDatasetPosition(std::string_view text, int64_t examples,
                                             const DatasetBatchSourceOptions& options);

// The order of epoch `epoch` of `examples` examples: a permutation drawn from
// (seed, epoch) when `shuffle`, else 0, 1, ...
void EpochOrder(int64_t examples, bool shuffle, uint64_t seed, int64_t epoch,
                std::vector<int64_t>* order);

}  // namespace ember::io::internal
