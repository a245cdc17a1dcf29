// SortedOrder (core/sorted_order.h) against std::stable_sort, on both sides of
// its switch from comparison to radix sorting and on keys that share digits.
#include "core/sorted_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "core/random.h"

namespace ember {
namespace {

std::vector<int64_t> StableOrder(const std::vector<uint64_t>& keys) {
  std::vector<int64_t> order(keys.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return keys[a] < keys[b]; });
  return order;
}

void ExpectSortsAsStableSort(const std::vector<uint64_t>& keys, const std::string& what) {
  SCOPED_TRACE(what + ", " + std::to_string(keys.size()) + " keys");
  std::vector<int64_t> order = {7, 7, 7};  // Overwritten whatever it held.
  std::vector<uint64_t> sorted;
  SortedOrder(keys, &order, &sorted);
  EXPECT_EQ(StableOrder(keys), order);
  std::vector<uint64_t> expected = keys;
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(expected, sorted);
  std::vector<int64_t> order_only;
  SortedOrder(keys, &order_only);
  EXPECT_EQ(order, order_only);
}

TEST(SortedOrderTest, SortsLikeAStableSortOnEitherSideOfTheRadixThreshold) {
  RandomStream random(3);
  // 300000: past the pairs a thread keeps.
  for (int64_t n : {0, 1, 2, 100, 511, 512, 513, 5000, 100000, 300000}) {
    std::vector<uint64_t> keys(n);
    for (uint64_t& key : keys) key = random.NextU64();
    ExpectSortsAsStableSort(keys, "random");
    // Repeats: equal keys keep their input order.
    for (uint64_t& key : keys) key %= 97;
    ExpectSortsAsStableSort(keys, "97 distinct");
  }
}

TEST(SortedOrderTest, KeysSharingDigitsAreSortedByTheOthers) {
  RandomStream random(4);
  std::vector<uint64_t> low(20000), high(20000), middle(20000), edges(20000);
  for (size_t i = 0; i < low.size(); ++i) {
    const uint64_t r = random.NextU64();
    low[i] = r & 0xffff;                              // high digits all zero
    high[i] = r << 48;                                // low digits all zero
    middle[i] = 0xab000000000000cdULL | (r & 0x00ffff0000000000ULL);
    edges[i] = (r & 1) ? ~uint64_t{0} - (r % 3) : (r % 3);  // extremes
  }
  ExpectSortsAsStableSort(low, "low bits only");
  ExpectSortsAsStableSort(high, "high bits only");
  ExpectSortsAsStableSort(middle, "middle bits only");
  ExpectSortsAsStableSort(edges, "0 and the largest key");
  ExpectSortsAsStableSort(std::vector<uint64_t>(3000, 42), "one key");
}

}  // namespace
}  // namespace ember
