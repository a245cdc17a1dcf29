#include "embedding/internal/pending_writes.h"

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ember::embedding {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

constexpr int64_t kRowBytes = 8;

// Rows whose 8 bytes are the value of `value` per key.
std::vector<char> RowsOf(const std::vector<Key>& keys, uint64_t value) {
  std::vector<char> rows(keys.size() * kRowBytes);
  for (size_t i = 0; i < keys.size(); ++i) std::memcpy(&rows[i * kRowBytes], &value, kRowBytes);
  return rows;
}

// (key, value of the row, or -1 for a Delete) of every write, in the order
// ForEachSorted gives them.
std::vector<std::pair<Key, int64_t>> Writes(const PendingWrites& writes) {
  std::vector<std::pair<Key, int64_t>> seen;
  const auto by_key = [](Key key) { return key; };
  writes.ForEachSorted(by_key, [&](Key key, uint64_t rank, const char* row) {
    EXPECT_EQ(key, rank);
    int64_t value = -1;
    if (row != nullptr) std::memcpy(&value, row, kRowBytes);
    seen.emplace_back(key, value);
  });
  return seen;
}

// What Find says of `key`, with the row's value when it finds one.
std::pair<PendingWrites::Found, int64_t> Find(const PendingWrites& writes, Key key) {
  int64_t value = -7;
  const PendingWrites::Found found = writes.Find(key, reinterpret_cast<char*>(&value));
  return {found, value};
}

TEST(PendingWritesTest, FindsTheLatestWriteOfEachKey) {
  PendingWrites writes(kRowBytes);
  EXPECT_TRUE(writes.empty());
  writes.Put({5, 1, 9}, RowsOf({5, 1, 9}, 10).data());
  writes.Put({1}, RowsOf({1}, 11).data());
  writes.Delete({9});
  writes.Delete({4});
  EXPECT_EQ(4, writes.size());  // keys 5, 1, 9 and 4, once each
  EXPECT_EQ(std::make_pair(PendingWrites::Found::kRow, int64_t{10}), Find(writes, 5));
  EXPECT_EQ(std::make_pair(PendingWrites::Found::kRow, int64_t{11}), Find(writes, 1));
  // A Delete leaves the output alone.
  EXPECT_EQ(std::make_pair(PendingWrites::Found::kDeleted, int64_t{-7}), Find(writes, 9));
  EXPECT_EQ(std::make_pair(PendingWrites::Found::kDeleted, int64_t{-7}), Find(writes, 4));
  EXPECT_EQ(std::make_pair(PendingWrites::Found::kAbsent, int64_t{-7}), Find(writes, 2));
  // A Put after a Delete brings the row back.
  writes.Put({9}, RowsOf({9}, 12).data());
  EXPECT_EQ(std::make_pair(PendingWrites::Found::kRow, int64_t{12}), Find(writes, 9));
}

TEST(PendingWritesTest, TheLastRowOfAKeyRepeatedInOnePutWins) {
  PendingWrites writes(kRowBytes);
  std::vector<char> rows = RowsOf({3, 3}, 1);
  const int64_t second = 2;
  std::memcpy(&rows[kRowBytes], &second, kRowBytes);
  writes.Put({3, 3}, rows.data());
  EXPECT_THAT(Writes(writes), ElementsAre(Pair(3, 2)));
}

TEST(PendingWritesTest, ListsWritesInIncreasingKeyOrderWithEdgeKeys) {
  PendingWrites writes(kRowBytes);
  writes.Put({UINT64_MAX, 7, 0}, RowsOf({UINT64_MAX, 7, 0}, 1).data());
  writes.Delete({3});
  EXPECT_THAT(Writes(writes),
              ElementsAre(Pair(0, 1), Pair(3, -1), Pair(7, 1), Pair(UINT64_MAX, 1)));
}

TEST(PendingWritesTest, AddOlderToKeepsTheNewerWritesOfTheOther) {
  PendingWrites older(kRowBytes);
  older.Put({1, 2}, RowsOf({1, 2}, 1).data());
  older.Delete({3});
  PendingWrites newer(kRowBytes);
  newer.Put({2}, RowsOf({2}, 2).data());
  newer.Delete({1});
  older.AddOlderTo(newer);
  EXPECT_THAT(Writes(newer), ElementsAre(Pair(1, -1), Pair(2, 2), Pair(3, -1)));
}

TEST(PendingWritesTest, SwapAndClear) {
  PendingWrites a(kRowBytes);
  PendingWrites b(kRowBytes);
  a.Put({1}, RowsOf({1}, 1).data());
  a.Swap(b);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(PendingWrites::Found::kAbsent, Find(a, 1).first);
  EXPECT_EQ(std::make_pair(PendingWrites::Found::kRow, int64_t{1}), Find(b, 1));
  b.Clear();
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(PendingWrites::Found::kAbsent, Find(b, 1).first);
  b.Put({2}, RowsOf({2}, 2).data());
  EXPECT_THAT(Writes(b), ElementsAre(Pair(2, 2)));
}

TEST(PendingWritesTest, HoldsManyKeys) {
  PendingWrites writes(kRowBytes);
  std::vector<Key> keys;
  for (Key k = 0; k < 20000; ++k) keys.push_back(k * 7919 % 20011);
  writes.Put(keys, RowsOf(keys, 5).data());
  EXPECT_EQ(20000, writes.size());
  for (Key key : keys) ASSERT_EQ(PendingWrites::Found::kRow, Find(writes, key).first) << key;
  std::vector<std::pair<Key, int64_t>> seen = Writes(writes);
  ASSERT_EQ(20000u, seen.size());
  for (size_t i = 1; i < seen.size(); ++i) ASSERT_LT(seen[i - 1].first, seen[i].first);
}

}  // namespace
}  // namespace ember::embedding
