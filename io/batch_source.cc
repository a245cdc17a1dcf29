#include "io/batch_source.h"

#include <algorithm>
#include <numeric>

#include "core/random.h"

namespace ember::io {
namespace {
// The stream of the epoch permutations (seed, kShuffleStream + epoch).
constexpr uint64_t kShuffleStream = 0x5eed0000u;
}  // namespace

DatasetBatchSource::DatasetBatchSource(const Dataset& data,
                                       const DatasetBatchSourceOptions& options)
    : data_(data), options_(options), next_(data.size()) {}

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
    if (options_.shuffle) {
      order_.resize(n);
      std::iota(order_.begin(), order_.end(), 0);
      RandomStream random(options_.seed, kShuffleStream + static_cast<uint64_t>(epoch_));
      for (int64_t i = n - 1; i > 0; --i) {
        std::swap(order_[i], order_[random.NextBelow(static_cast<uint64_t>(i + 1))]);
      }
    }
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

}  // namespace ember::io
