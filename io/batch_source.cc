#include "io/batch_source.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>

#include "core/allocator.h"
#include "core/json.h"
#include "core/random.h"

namespace ember::io {
namespace {
// The stream of the epoch permutations (seed, kShuffleStream + epoch).
constexpr uint64_t kShuffleStream = 0x5eed0000u;

// Where a DatasetBatchSource is (its ResumePosition): its data's size, its
// batches and order, and the epoch and example it reads next.
struct DatasetPosition {
  int64_t dataset = 0;
  int64_t batch_size = 0;
  bool shuffle = false;
  uint64_t seed = 0;
  int64_t epoch = 0;
  int64_t next = 0;
};

constexpr auto kDatasetPositionFields = [](auto& p, auto&& field) {
  field("dataset", p.dataset);
  field("batch_size", p.batch_size);
  field("shuffle", p.shuffle);
  field("seed", p.seed);
  field("epoch", p.epoch);
  field("next", p.next);
};
void to_json(Json& j, const DatasetPosition& p) { WriteJsonFields(j, p, kDatasetPositionFields); }
void from_json(const Json& j, DatasetPosition& p) { ReadJsonFields(j, p, kDatasetPositionFields); }

// One line, as positions have been written from the start.
std::string DatasetPositionText(const DatasetPosition& position) {
  return JsonText(Json(position)) + "\n";
}

Result<DatasetPosition> ParseDatasetPosition(std::string_view text) {
  Result<Json> json = ParseJsonText(std::string(text));
  if (!json.ok()) {
    return Status::InvalidArgument("data position ", text, ": ", json.status().message());
  }
  Result<DatasetPosition> position = FromJson<DatasetPosition>(*json);
  if (!position.ok()) {
    return Status::InvalidArgument("data position ", text, ": not a position of in-memory data (",
                                   position.status().message(), ")");
  }
  return position;
}

}  // namespace

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
  const int64_t n = data_.size();
  order_.resize(n);
  std::iota(order_.begin(), order_.end(), 0);
  RandomStream random(options_.seed, kShuffleStream + static_cast<uint64_t>(epoch_));
  for (int64_t i = n - 1; i > 0; --i) {
    std::swap(order_[i], order_[random.NextBelow(static_cast<uint64_t>(i + 1))]);
  }
}

Result<std::string> DatasetBatchSource::ResumePosition() const {
  const DatasetPosition position{
      data_.size(), options_.batch_size, options_.shuffle, options_.seed, epoch_, next_};
  return DatasetPositionText(position);
}

Status DatasetBatchSource::ResumeFrom(std::string_view text) {
  const auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("data position ", text, ": ", why);
  };
  EMBER_ASSIGN_OR_RETURN(const DatasetPosition position, ParseDatasetPosition(text));
  int64_t epoch = position.epoch, next = position.next;
  if (position.dataset != data_.size()) {
    return bad("it is of data with " + std::to_string(position.dataset) + " examples, this has " +
               std::to_string(data_.size()));
  }
  if (position.batch_size != options_.batch_size) {
    return bad("it is of batches of " + std::to_string(position.batch_size) + ", these are of " +
               std::to_string(options_.batch_size));
  }
  if (position.shuffle != options_.shuffle ||
      (options_.shuffle && position.seed != options_.seed)) {
    return bad("it is of another order (shuffle or seed differ)");
  }
  // Before the first batch: epoch -1 with the whole (empty) epoch behind.
  const bool start = epoch == -1 && next == data_.size();
  if (!start && (epoch < 0 || next < 0 || next > data_.size())) {
    return bad("epoch " + std::to_string(epoch) + ", example " + std::to_string(next) +
               " is no place in this data");
  }
  if (epoch >= options_.num_epochs) {
    // Past this source's last epoch (a job resumed with fewer epochs): done.
    epoch = options_.num_epochs - 1;
    next = data_.size();
  }
  epoch_ = epoch;
  next_ = next;
  if (epoch_ >= 0) OrderEpoch();
  return Status::OK();
}

Result<std::string> RebatchDatasetPosition(std::string_view text, int64_t batch_size) {
  if (batch_size < 1) return Status::InvalidArgument("batch size ", batch_size, " is below 1");
  EMBER_ASSIGN_OR_RETURN(DatasetPosition position, ParseDatasetPosition(text));
  position.batch_size = batch_size;
  return DatasetPositionText(position);
}

}  // namespace ember::io
