#include "embedding/distinct_keys.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "core/random.h"

namespace ember::embedding {
namespace {

// `n` distinct keys: a bijection of 0..n-1 offset by `base`, so that sets
// with different bases are disjoint.
std::vector<Key> Keys(int64_t n, uint64_t base) {
  std::vector<Key> keys(n);
  for (int64_t i = 0; i < n; ++i) keys[i] = (base + i) * 0x9e3779b97f4a7c15ULL;
  return keys;
}

TEST(DistinctKeyCounterTest, EstimatesAreWithinTwoPercentFromOneToTwoMillionKeys) {
  EXPECT_EQ(0, DistinctKeyCounter().Estimate());
  // Both sides of the switch from linear counting to the HyperLogLog
  // estimate (3.5 x 65536 keys), and past the point where every register is
  // set. The standard error is at most ~0.65%, so 2% is 3 of them; a few
  // keys are counted exactly.
  for (const int64_t n : {1, 10, 1000, 60000, 200000, 240000, 300000, 1000000, 2000000}) {
    DistinctKeyCounter counter;
    counter.Add(Keys(n, static_cast<uint64_t>(n) << 32));
    const double estimate = static_cast<double>(counter.Estimate());
    EXPECT_NEAR(static_cast<double>(n), estimate, n <= 10 ? 0.0 : 0.02 * n) << n;
  }
}

TEST(DistinctKeyCounterTest, RepeatsAndOrderDoNotChangeTheEstimate) {
  const std::vector<Key> keys = Keys(50000, 7);
  DistinctKeyCounter once;
  once.Add(keys);
  // The same keys three times each, shuffled, one at a time.
  std::vector<Key> repeated;
  for (int r = 0; r < 3; ++r) repeated.insert(repeated.end(), keys.begin(), keys.end());
  RandomStream random(3);
  for (size_t i = repeated.size() - 1; i > 0; --i) {
    std::swap(repeated[i], repeated[random.NextBelow(i + 1)]);
  }
  DistinctKeyCounter thrice;
  for (Key key : repeated) thrice.Add(key);
  EXPECT_EQ(once.Estimate(), thrice.Estimate());
  // New keys raise it.
  thrice.Add(Keys(50000, 1 << 20));
  EXPECT_NEAR(100000.0, static_cast<double>(thrice.Estimate()), 1000.0);
}

}  // namespace
}  // namespace ember::embedding
