#include "io/batch_source.h"

#include <algorithm>
#include <charconv>
#include <numeric>
#include <string>
#include <system_error>

#include "core/allocator.h"
#include "core/json.h"
#include "core/random.h"

namespace ember::io {
namespace {
// The stream of the epoch permutations (seed, kShuffleStream + epoch).
constexpr uint64_t kShuffleStream = 0x5eed0000u;
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
  JsonObject o;
  o.Add("dataset", data_.size())
      .Add("batch_size", options_.batch_size)
      .Add("shuffle", options_.shuffle)
      .AddRaw("seed", std::to_string(options_.seed))
      .Add("epoch", epoch_)
      .Add("next", next_);
  return o.ToString(-1);
}

Status DatasetBatchSource::ResumeFrom(std::string_view position) {
  const auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("data position ", position, ": ", why);
  };
  Result<JsonValue> parsed = ParseJson(std::string(position));
  if (!parsed.ok()) return bad(std::string(parsed.status().message()));
  // The integer field `key`, or false.
  const auto integer = [&](const char* key, auto* out) {
    const JsonValue* v = parsed->Find(key);
    if (v == nullptr || v->type != JsonValue::Type::kNumber) return false;
    const char* end = v->text.data() + v->text.size();
    const auto [ptr, ec] = std::from_chars(v->text.data(), end, *out);
    return ec == std::errc() && ptr == end;
  };
  int64_t examples = 0, batch_size = 0, epoch = 0, next = 0;
  uint64_t seed = 0;
  const JsonValue* shuffle = parsed->Find("shuffle");
  if (!integer("dataset", &examples) || !integer("batch_size", &batch_size) ||
      !integer("seed", &seed) || !integer("epoch", &epoch) || !integer("next", &next) ||
      shuffle == nullptr || shuffle->type != JsonValue::Type::kBool) {
    return bad("not a position of in-memory data");
  }
  if (examples != data_.size()) {
    return bad("it is of data with " + std::to_string(examples) + " examples, this has " +
               std::to_string(data_.size()));
  }
  if (batch_size != options_.batch_size) {
    return bad("it is of batches of " + std::to_string(batch_size) + ", these are of " +
               std::to_string(options_.batch_size));
  }
  if (shuffle->boolean != options_.shuffle || (options_.shuffle && seed != options_.seed)) {
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

Result<std::string> RebatchDatasetPosition(std::string_view position, int64_t batch_size) {
  if (batch_size < 1) return Status::InvalidArgument("batch size ", batch_size, " is below 1");
  Result<JsonValue> parsed = ParseJson(std::string(position));
  const JsonValue* old = parsed.ok() ? parsed->Find("batch_size") : nullptr;
  if (old == nullptr || parsed->Find("dataset") == nullptr || parsed->Find("next") == nullptr) {
    return Status::InvalidArgument("data position ", position,
                                   ": not a position of in-memory data");
  }
  // The same text with the one field changed: the other fields keep their
  // exact spelling (the seed is a 64-bit integer).
  const std::string text(position);
  const std::string key = "\"batch_size\":";
  const size_t at = text.find(key);
  if (at == std::string::npos) {
    return Status::InvalidArgument("data position ", position, ": no batch_size field");
  }
  size_t end = at + key.size();
  while (end < text.size() && (text[end] == ' ' || (text[end] >= '0' && text[end] <= '9'))) ++end;
  return text.substr(0, at + key.size()) + std::to_string(batch_size) + text.substr(end);
}

}  // namespace ember::io
