#include "embedding/internal/row_store.h"

#include <cstdint>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>

#include "core/random.h"

namespace ember::embedding {
namespace {

TEST(KeyIndexTest, RandomInsertsAndErasesAgreeWithAHashMap) {
  KeyIndex index;
  std::unordered_map<Key, int64_t> reference;
  RandomStream random(1);
  // Few distinct keys, so that erases hit present keys and clusters form.
  for (int op = 0; op < 200000; ++op) {
    const Key key = random.NextBelow(4000) * 0x9e3779b97f4a7c15ULL;
    const uint64_t hash = Mix64(key);
    if (random.Bernoulli(0.55)) {
      if (index.Find(key, hash) < 0) {
        index.ReserveOneMore();
        index.Insert(key, hash, op);
        reference[key] = op;
      }
    } else {
      const auto it = reference.find(key);
      ASSERT_EQ(it == reference.end() ? -1 : it->second, index.Erase(key, hash)) << op;
      if (it != reference.end()) reference.erase(it);
    }
    if (op % 1000 == 0) index.ShrinkIfSparse();
  }
  ASSERT_EQ(static_cast<int64_t>(reference.size()), index.size());
  for (const auto& [key, slot] : reference) ASSERT_EQ(slot, index.Find(key, Mix64(key)));
}

TEST(KeyIndexTest, ShrinksWhenMostKeysAreErasedAndKeepsTheRest) {
  KeyIndex index;
  for (Key key = 0; key < 10000; ++key) {
    index.ReserveOneMore();
    index.Insert(key, Mix64(key), static_cast<int64_t>(key));
  }
  const int64_t full_capacity = index.capacity();
  for (Key key = 0; key < 10000; ++key) {
    if (key % 100 == 0) continue;
    ASSERT_EQ(static_cast<int64_t>(key), index.Erase(key, Mix64(key)));
  }
  index.ShrinkIfSparse();
  EXPECT_LT(index.capacity(), full_capacity / 8);
  EXPECT_EQ(100, index.size());
  for (Key key = 0; key < 10000; ++key) {
    ASSERT_EQ(key % 100 == 0 ? static_cast<int64_t>(key) : -1, index.Find(key, Mix64(key)));
  }
}

TEST(KeyIndexTest, SetSlotRepointsAPresentKey) {
  KeyIndex index;
  index.ReserveOneMore();
  index.Insert(~Key{0}, Mix64(~Key{0}), 3);
  index.SetSlot(~Key{0}, Mix64(~Key{0}), 9);
  EXPECT_EQ(9, index.Find(~Key{0}, Mix64(~Key{0})));
}

TEST(RowArenaTest, RemovingRowsFreesEmptiedChunksButOneSpare) {
  RowArena arena(/*row_floats=*/4, /*chunk_bytes=*/64);  // 4 rows per chunk
  for (int i = 0; i < 16; ++i) {
    arena.ReserveOneMore();
    arena.row(arena.Append())[0] = static_cast<float>(i);
  }
  const int64_t full_bytes = arena.bytes();
  for (int i = 0; i < 15; ++i) arena.RemoveLast();
  EXPECT_EQ(1, arena.size());
  EXPECT_EQ(0.0f, arena.row(0)[0]);
  // One chunk in use and one spare out of four.
  EXPECT_EQ(full_bytes - 2 * 4 * 4 * 4, arena.bytes());
}

}  // namespace
}  // namespace ember::embedding
