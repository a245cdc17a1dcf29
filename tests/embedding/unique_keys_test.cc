#include "embedding/unique_keys.h"

#include <cstdint>
#include <limits>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>

#include "core/random.h"

namespace ember::embedding {
namespace {

// What UniqueKeys must return, computed the plain way.
void Reference(const std::vector<Key>& keys, std::vector<Key>* unique,
               std::vector<int64_t>* index) {
  std::unordered_map<Key, int64_t> position;
  unique->clear();
  index->clear();
  for (Key key : keys) {
    auto [it, inserted] = position.emplace(key, static_cast<int64_t>(unique->size()));
    if (inserted) unique->push_back(key);
    index->push_back(it->second);
  }
}

// `n` keys drawn from `distinct` values spread over the 64-bit range (0 and
// the largest key among them), so that most repeat.
std::vector<Key> RandomKeys(int64_t n, int64_t distinct, uint64_t seed) {
  RandomStream random(seed);
  std::vector<Key> values = {0, std::numeric_limits<Key>::max()};
  while (static_cast<int64_t>(values.size()) < distinct) values.push_back(random.NextU64());
  std::vector<Key> keys(n);
  for (Key& key : keys) key = values[random.NextU64() % values.size()];
  return keys;
}

TEST(UniqueKeysTest, MatchesTheFirstAppearanceOrderOfAPlainMap) {
  // Successive calls of different sizes on one thread reuse its table: a
  // slot left by an earlier call must read as empty in the next.
  int calls = 0;
  for (int64_t n : {1, 7, 53248, 100, 53248, 0, 3000, 200000, 5}) {
    for (int64_t distinct : {int64_t{1}, n / 3 + 1, n + 1}) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " distinct=" << distinct);
      const std::vector<Key> keys = RandomKeys(n, distinct, 100 + calls++);
      std::vector<Key> unique = {42}, expected_unique;  // stale content is cleared
      std::vector<int64_t> index, expected_index;
      UniqueKeys(keys, &unique, &index);
      Reference(keys, &expected_unique, &expected_index);
      EXPECT_EQ(expected_unique, unique);
      EXPECT_EQ(expected_index, index);
    }
  }
}

TEST(UniqueKeysTest, ABatchTooLargeForTheKeptTableGetsItsOwnAndLeavesTheKeptOneWhole) {
  // Over 1M keys: a table of its own for this call. The thread's kept table,
  // used before and after, must still give the right result.
  std::vector<Key> unique, expected_unique;
  std::vector<int64_t> index, expected_index;
  int seed = 200;
  for (int64_t n : {int64_t{5000}, (int64_t{1} << 20) + 5, int64_t{5000}}) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    const std::vector<Key> keys = RandomKeys(n, 3000, seed++);
    UniqueKeys(keys, &unique, &index);
    Reference(keys, &expected_unique, &expected_index);
    EXPECT_EQ(expected_unique, unique);
    EXPECT_EQ(expected_index, index);
  }
}

TEST(UniqueKeysTest, KeysWithEqualLowBitsStayDistinct) {
  // Keys equal modulo 2^40 (hashed ids often differ only in high bits), each
  // repeated, in a table of 512 slots for 192 keys where probes collide.
  std::vector<Key> keys;
  for (int repeat = 0; repeat < 3; ++repeat) {
    for (Key k = 0; k < 64; ++k) keys.push_back((k << 40) | 5);
  }
  std::vector<Key> unique;
  std::vector<int64_t> index;
  UniqueKeys(keys, &unique, &index);
  ASSERT_EQ(64u, unique.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(static_cast<int64_t>(i % 64), index[i]) << i;
    EXPECT_EQ(keys[i], unique[index[i]]) << i;
  }
}

}  // namespace
}  // namespace ember::embedding
