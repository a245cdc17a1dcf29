#include "io/batch_source.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/allocator.h"
#include "io/internal/dataset_position.h"

namespace ember::io {

using internal::DatasetPosition;
using internal::DatasetPositionText;

Result<std::string> BatchSource::ResumePosition() const {
  return Status::Unimplemented("this batch source cannot say where it is");
}

Status BatchSource::ResumeFrom(std::string_view) {
  return Status::Unimplemented("this batch source cannot resume from a position");
}

DatasetBatchSource::DatasetBatchSource(const Dataset& data,
                                       const DatasetBatchSourceOptions& options)
    : data_(data), options_(options), next_(data.size()) {
  if (!options_.shuffle) return;
  // A shuffled batch reads each example from anywhere in the data.
  const Batch& all = data_.all();
  AdviseHugePages(all.keys.data(), all.keys.size() * sizeof(all.keys[0]));
  AdviseHugePages(all.offsets.data(), all.offsets.size() * sizeof(all.offsets[0]));
  AdviseHugePages(all.dense.data(), all.dense.size() * sizeof(all.dense[0]));
}

int64_t DatasetBatchSource::EstimatedBatches() const {
  const int64_t per_epoch = (data_.size() + options_.batch_size - 1) / options_.batch_size;
  return per_epoch * options_.num_epochs;
}

Result<bool> DatasetBatchSource::Next(Batch* out) {
  const int64_t n = data_.size();
  if (next_ >= n) {
    // The epoch after the one that ended (the first one on the first call).
    if (epoch_ + 1 >= options_.num_epochs || n == 0) return false;
    ++epoch_;
    next_ = 0;
    OrderEpoch();
  }
  const int64_t end = std::min(n, next_ + options_.batch_size);
  if (options_.shuffle) {
    indices_.assign(order_.begin() + next_, order_.begin() + end);
    data_.GatherBatch(indices_, out);
  } else {
    data_.GetBatch(next_, end, out);
  }
  next_ = end;
  return true;
}

void DatasetBatchSource::OrderEpoch() {
  if (!options_.shuffle) return;
  internal::EpochOrder(data_.size(), /*shuffle=*/true, options_.seed, epoch_, &order_);
}

Result<std::string> DatasetBatchSource::ResumePosition() const {
  const DatasetPosition position{
      data_.size(), options_.batch_size, options_.shuffle, options_.seed, epoch_, next_};
  return DatasetPositionText(position);
}

Status DatasetBatchSource::ResumeFrom(std::string_view text) {
  EMBER_ASSIGN_OR_RETURN(const DatasetPosition position,
                         internal::CheckDatasetPosition(text, data_.size(), options_));
  epoch_ = position.epoch;
  next_ = position.next;
  if (epoch_ >= 0) OrderEpoch();
  return Status::OK();
}

Result<std::string> RebatchDatasetPosition(std::string_view text, int64_t batch_size) {
  if (batch_size < 1) return Status::InvalidArgument("batch size ", batch_size, " is below 1");
  EMBER_ASSIGN_OR_RETURN(DatasetPosition position, internal::ParseDatasetPosition(text));
  position.batch_size = batch_size;
  return DatasetPositionText(position);
}

}  // namespace ember::io
