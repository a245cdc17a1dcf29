// TierKeyOrder (embedding/internal/tier_key_order.h): the ranks under which
// a RocksDB tier stores keys are a bijection, and by shard.

#include "embedding/internal/tier_key_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/random.h"
#include "core/status.h"

namespace ember::embedding::internal {
namespace {

// Keys near the ends of the key space and of the hash space, and random ones.
std::vector<Key> TestKeys() {
  std::vector<Key> keys = {0, 1, 2, ~Key{0}, ~Key{0} - 1, Key{1} << 63};
  for (uint64_t hash : {uint64_t{0}, uint64_t{1}, ~uint64_t{0}, ~uint64_t{0} - 1}) {
    keys.push_back(UnMix64(hash));
  }
  RandomStream stream(3);
  for (int i = 0; i < 20000; ++i) keys.push_back(stream.NextU64());
  return keys;
}

class TierKeyOrderTest : public ::testing::TestWithParam<int> {};

TEST_P(TierKeyOrderTest, KeyOfUndoesRank) {
  const TierKeyOrder order = TierKeyOrder::ByShard(GetParam());
  for (Key key : TestKeys()) ASSERT_EQ(key, order.KeyOf(order.Rank(key))) << key;
  // And the other way round, at the ends of the ranks.
  for (uint64_t rank : {uint64_t{0}, uint64_t{1}, ~uint64_t{0}, ~uint64_t{0} - 1}) {
    ASSERT_EQ(rank, order.Rank(order.KeyOf(rank))) << rank;
  }
}

TEST_P(TierKeyOrderTest, RanksRunShardByShardThenByHash) {
  const int shards = GetParam();
  const TierKeyOrder order = TierKeyOrder::ByShard(shards);
  std::vector<Key> keys = TestKeys();
  std::sort(keys.begin(), keys.end(), [&](Key a, Key b) { return order.Rank(a) < order.Rank(b); });
  for (size_t i = 1; i < keys.size(); ++i) {
    const uint64_t before = Mix64(keys[i - 1]), after = Mix64(keys[i]);
    const uint64_t n = static_cast<uint64_t>(shards);
    ASSERT_LE(before % n, after % n) << "position " << i;
    if (before % n == after % n) {
      ASSERT_LT(before, after) << "position " << i;
    }
  }
  // Shard 0 starts at rank 0; the last shard ends at the last rank.
  EXPECT_EQ(0u, order.Rank(UnMix64(0)));
  const uint64_t n = static_cast<uint64_t>(shards);
  const uint64_t last = ~uint64_t{0} - ((~uint64_t{0} % n + 1) % n);  // largest hash ≡ n - 1
  ASSERT_EQ(n - 1, last % n);
  EXPECT_EQ(~uint64_t{0}, order.Rank(UnMix64(last))) << "the largest hash of the last shard";
}

TEST_P(TierKeyOrderTest, DescribeParsesBack) {
  const TierKeyOrder order = TierKeyOrder::ByShard(GetParam());
  Result<TierKeyOrder> parsed = TierKeyOrder::Parse(order.Describe());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(GetParam(), parsed->shards());
}

INSTANTIATE_TEST_SUITE_P(Shards, TierKeyOrderTest, ::testing::Values(1, 2, 3, 7, 64, 1000, 4096));

TEST(TierKeyOrderNumericTest, RanksAreKeys) {
  const TierKeyOrder order = TierKeyOrder::Numeric();
  for (Key key : TestKeys()) {
    ASSERT_EQ(key, order.Rank(key));
    ASSERT_EQ(key, order.KeyOf(key));
  }
  Result<TierKeyOrder> parsed = TierKeyOrder::Parse(order.Describe());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(0, parsed->shards());
}

TEST(TierKeyOrderParseTest, RefusesWhatDescribeNeverWrites) {
  for (const char* text : {"", "mix64 mod ", "mix64 mod 0", "mix64 mod -3", "mix64 mod 7x",
                           "numerical", "mix64 mod 99999999999"}) {
    EXPECT_EQ(StatusCode::kInvalidArgument, TierKeyOrder::Parse(text).status().code()) << text;
  }
}

}  // namespace
}  // namespace ember::embedding::internal
