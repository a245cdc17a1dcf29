#include "embedding/distinct_keys.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "core/random.h"

namespace ember::embedding {
namespace {

// log2 of the register count.
constexpr int kPrecision = 16;
constexpr int64_t kRegisters = int64_t{1} << kPrecision;

}  // namespace

DistinctKeyCounter::DistinctKeyCounter() : registers_(kRegisters, 0) {}

void DistinctKeyCounter::Add(Key key) {
  const uint64_t hash = Mix64(key);
  // The top bits pick the register; it keeps the longest run of leading
  // zeros (plus one) seen in the rest. The guard bit bounds the run at 48.
  const uint64_t rest = (hash << kPrecision) | (uint64_t{1} << (kPrecision - 1));
  const uint8_t rank = static_cast<uint8_t>(std::countl_zero(rest) + 1);
  uint8_t& max_rank = registers_[hash >> (64 - kPrecision)];
  max_rank = std::max(max_rank, rank);
}

int64_t DistinctKeyCounter::Estimate() const {
  const double m = static_cast<double>(kRegisters);
  double inverse_sum = 0.0;
  int64_t zeros = 0;
  for (uint8_t rank : registers_) {
    inverse_sum += std::ldexp(1.0, -rank);
    zeros += rank == 0;
  }
  if (zeros == kRegisters) return 0;
  const double alpha = 0.7213 / (1.0 + 1.079 / m);
  const double raw = alpha * m * m / inverse_sum;
  // Linear counting (from the empty registers) is unbiased, and more exact
  // than the raw estimate up to ~3.5 m keys: the raw one is 5.6% high at
  // 2 m and 1% at 3 m, linear counting's error grows from 0.3% (n << m) to
  // 0.65% at 3.5 m; the raw one's is 0.6% there, 0.4% from 4 m on
  // (measured, 30 key sets per size).
  if (zeros > 0) {
    const double linear = m * std::log(m / static_cast<double>(zeros));
    if (linear <= 3.5 * m) return std::llround(linear);
  }
  return std::llround(raw);
}

}  // namespace ember::embedding
