#include "embedding/internal/count_min_sketch.h"

#include <algorithm>
#include <cstring>
#include <bit>
#include <limits>

#include "core/random.h"

namespace ember::embedding {

CountMinSketch::CountMinSketch(int64_t width, int depth, uint64_t seed)
    : width_(static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(width)))),
      mask_(static_cast<uint64_t>(width_) - 1),
      depth_(depth),
      seed_(seed),
      counters_(std::make_unique<uint32_t[]>(width_ * depth)) {}

uint64_t CountMinSketch::Hash(Key key) const { return HashCombine(seed_, key); }

uint32_t* CountMinSketch::Counter(uint64_t hash, int row) const {
  const uint64_t a = hash & 0xffffffffu;
  const uint64_t b = (hash >> 32) | 1;
  const uint64_t column = (a + static_cast<uint64_t>(row) * b) & mask_;
  return &counters_[static_cast<int64_t>(row) * width_ + static_cast<int64_t>(column)];
}

uint32_t CountMinSketch::Add(Key key) {
  const uint64_t hash = Hash(key);
  uint32_t* counters[16];
  uint32_t min = std::numeric_limits<uint32_t>::max();
  for (int row = 0; row < depth_; ++row) {
    counters[row] = Counter(hash, row);
    min = std::min(min, *counters[row]);
  }
  if (min == std::numeric_limits<uint32_t>::max()) return min;  // saturated
  const uint32_t raised = min + 1;
  for (int row = 0; row < depth_; ++row) *counters[row] = std::max(*counters[row], raised);
  return raised;
}

uint32_t CountMinSketch::Estimate(Key key) const {
  const uint64_t hash = Hash(key);
  uint32_t min = std::numeric_limits<uint32_t>::max();
  for (int row = 0; row < depth_; ++row) min = std::min(min, *Counter(hash, row));
  return min;
}

void CountMinSketch::Prefetch(Key key) const {
  const uint64_t hash = Hash(key);
  for (int row = 0; row < depth_; ++row) __builtin_prefetch(Counter(hash, row));
}

void CountMinSketch::AppendCounters(std::string* out) const {
  out->append(reinterpret_cast<const char*>(counters_.get()), static_cast<size_t>(bytes()));
}

void CountMinSketch::LoadCounters(std::string_view counters) {
  std::memcpy(counters_.get(), counters.data(), static_cast<size_t>(bytes()));
}

}  // namespace ember::embedding
