#include "embedding/internal/key_filter.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "core/random.h"

namespace ember::embedding::internal {
namespace {

// Hashes as the tables give them: Mix64 of a key.
std::vector<uint64_t> Hashes(int64_t n, uint64_t seed) {
  std::vector<uint64_t> hashes(n);
  RandomStream random(seed);
  for (uint64_t& hash : hashes) hash = Mix64(random.NextU64());
  return hashes;
}

// The fraction of `probes` (none of them added) that `filter` reports.
double FalsePositiveRate(const KeyFilter& filter, const std::vector<uint64_t>& probes) {
  int64_t positives = 0;
  for (uint64_t hash : probes) positives += filter.MayContain(hash);
  return static_cast<double>(positives) / static_cast<double>(probes.size());
}

TEST(KeyFilterTest, AnEmptyFilterHoldsNothingAndNoBytes) {
  KeyFilter filter;
  EXPECT_FALSE(filter.MayContain(Mix64(1)));
  EXPECT_EQ(0, filter.bytes());
  EXPECT_EQ(0, filter.num_layers());
}

TEST(KeyFilterTest, EveryAddedKeyIsReportedThroughManyLayers) {
  KeyFilter filter;
  const std::vector<uint64_t> added = Hashes(100000, 1);
  for (uint64_t hash : added) filter.Add(hash);
  EXPECT_GE(filter.num_layers(), 5);
  for (uint64_t hash : added) ASSERT_TRUE(filter.MayContain(hash));
}

// Keys of one shard share their hash modulo the shard count; the filter must
// not depend on those bits.
TEST(KeyFilterTest, KeysOfOneShardSpreadAsWellAsAnyKeys) {
  KeyFilter filter;
  std::vector<uint64_t> shard_keys;
  RandomStream random(2);
  while (shard_keys.size() < 20000) {
    const uint64_t hash = Mix64(random.NextU64());
    if (hash % 64 == 5) shard_keys.push_back(hash);
  }
  for (uint64_t hash : shard_keys) filter.Add(hash);
  std::vector<uint64_t> probes;
  while (probes.size() < 100000) {
    const uint64_t hash = Mix64(random.NextU64());
    if (hash % 64 == 5) probes.push_back(hash);
  }
  EXPECT_LT(FalsePositiveRate(filter, probes), 0.015);
}

// The rates the header states: ~0.2% for one full layer, and ~1% for the
// layers a shard of a large table builds up (the sum of theirs).
TEST(KeyFilterTest, PrefetchChangesNoAnswer) {
  KeyFilter filter;
  const std::vector<uint64_t> added = Hashes(20000, 5);
  const std::vector<uint64_t> probes = Hashes(20000, 6);
  for (uint64_t hash : added) filter.Add(hash);
  std::vector<bool> before;
  for (uint64_t hash : probes) before.push_back(filter.MayContain(hash));
  const int64_t bytes = filter.bytes(), size = filter.size();
  for (uint64_t hash : added) filter.Prefetch(hash);
  for (uint64_t hash : probes) filter.Prefetch(hash);
  KeyFilter().Prefetch(Mix64(7));  // no layers: nothing to load
  EXPECT_EQ(bytes, filter.bytes());
  EXPECT_EQ(size, filter.size());
  for (uint64_t hash : added) ASSERT_TRUE(filter.MayContain(hash));
  for (size_t i = 0; i < probes.size(); ++i) ASSERT_EQ(before[i], filter.MayContain(probes[i]));
}

TEST(KeyFilterTest, FalsePositiveRatesAreThoseStated) {
  const std::vector<uint64_t> probes = Hashes(200000, 3);
  KeyFilter one_layer;
  for (uint64_t hash : Hashes(KeyFilter::kFirstLayerKeys, 4)) one_layer.Add(hash);
  ASSERT_EQ(1, one_layer.num_layers());
  EXPECT_LT(FalsePositiveRate(one_layer, probes), 0.004);

  KeyFilter many;
  for (uint64_t hash : Hashes(50000, 5)) many.Add(hash);
  EXPECT_LT(FalsePositiveRate(many, probes), 0.015);
}

// Layers double the room, so at most half of it is unused (past the first).
TEST(KeyFilterTest, BytesStayWithinTwiceTheKeysBits) {
  KeyFilter filter;
  for (uint64_t hash : Hashes(30000, 6)) {
    filter.Add(hash);
    const int64_t keys = std::max(filter.size(), KeyFilter::kFirstLayerKeys);
    ASSERT_LE(filter.bytes(), 2 * keys * KeyFilter::kBitsPerKey / 8 + 64);
  }
}

TEST(KeyFilterTest, AKeyReportedAlreadyTakesNoRoom) {
  KeyFilter filter;
  const std::vector<uint64_t> hashes = Hashes(1000, 7);
  for (uint64_t hash : hashes) filter.Add(hash);
  const int64_t size = filter.size();
  const int64_t bytes = filter.bytes();
  for (uint64_t hash : hashes) filter.Add(hash);
  EXPECT_EQ(size, filter.size());
  EXPECT_EQ(bytes, filter.bytes());
}

TEST(KeyFilterTest, AFilterThatWouldPassItsLimitReportsEveryKeyUntilCleared) {
  KeyFilter filter(/*max_bytes=*/1024);
  const std::vector<uint64_t> hashes = Hashes(2000, 8);
  for (uint64_t hash : hashes) filter.Add(hash);
  EXPECT_TRUE(filter.saturated());
  EXPECT_EQ(0, filter.bytes());
  EXPECT_TRUE(filter.MayContain(Mix64(12345)));
  for (uint64_t hash : hashes) EXPECT_TRUE(filter.MayContain(hash));

  filter.Clear();
  EXPECT_FALSE(filter.saturated());
  EXPECT_FALSE(filter.MayContain(hashes[0]));
  filter.Add(hashes[0]);
  EXPECT_TRUE(filter.MayContain(hashes[0]));
  EXPECT_LE(filter.bytes(), 1024);
}

}  // namespace
}  // namespace ember::embedding::internal
