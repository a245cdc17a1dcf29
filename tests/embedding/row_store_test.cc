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

TEST(KeyIndexTest, AReservedIndexTakesThatManyKeysWithoutGrowing) {
  KeyIndex index;
  index.Reserve(5000);
  const int64_t capacity = index.capacity();
  EXPECT_GE(capacity * 7 / 10, 5000);
  for (Key key = 0; key < 5000; ++key) {
    index.ReserveOneMore();
    index.Insert(key, Mix64(key), static_cast<int64_t>(key) + 1);
  }
  EXPECT_EQ(capacity, index.capacity());
  for (Key key = 0; key < 5000; ++key)
    ASSERT_EQ(static_cast<int64_t>(key) + 1, index.Find(key, Mix64(key)));
  // Reserving less than it holds keeps it as it is.
  index.Reserve(10);
  EXPECT_EQ(capacity, index.capacity());
  EXPECT_EQ(1, index.Find(0, Mix64(0)));
}

TEST(ChunkPoolTest, HandsOutEachReservedChunkOnceAndTakesChunksBack) {
  ChunkPool pool(/*chunk_bytes=*/256);
  EXPECT_EQ(nullptr, pool.Take());
  ASSERT_TRUE(pool.Reserve(10));
  EXPECT_EQ(10 * 256, pool.idle_bytes());
  std::vector<float*> chunks;
  for (int i = 0; i < 10; ++i) {
    float* chunk = pool.Take();
    ASSERT_NE(nullptr, chunk);
    EXPECT_TRUE(pool.Owns(chunk));
    for (int f = 0; f < 64; ++f) chunk[f] = static_cast<float>(i * 64 + f);
    chunks.push_back(chunk);
  }
  EXPECT_EQ(nullptr, pool.Take());
  EXPECT_EQ(0, pool.idle_bytes());
  // No two chunks overlap: each still holds what was written to it.
  for (int i = 0; i < 10; ++i) {
    for (int f = 0; f < 64; ++f) ASSERT_EQ(static_cast<float>(i * 64 + f), chunks[i][f]);
  }
  std::vector<float> heap(64);
  EXPECT_FALSE(pool.Owns(heap.data()));
  pool.Give(chunks[3]);
  EXPECT_EQ(256, pool.idle_bytes());
  EXPECT_EQ(chunks[3], pool.Take());
  // A second reservation adds a region of its own.
  ASSERT_TRUE(pool.Reserve(2));
  EXPECT_TRUE(pool.Owns(pool.Take()));
  // More than the address space is refused, the pool unchanged.
  EXPECT_FALSE(pool.Reserve(int64_t{1} << 60));
  EXPECT_EQ(256, pool.idle_bytes());
}

TEST(RowArenaTest, RowsGoToThePoolWhileItHasChunksThenToTheHeap) {
  constexpr int64_t kRowFloats = 4;
  const int64_t chunk_bytes = RowArena::ChunkBytesFor(kRowFloats, /*chunk_bytes=*/64);
  ASSERT_EQ(64, chunk_bytes);  // 4 rows per chunk
  ChunkPool pool(chunk_bytes);
  ASSERT_TRUE(pool.Reserve(3));
  {
    RowArena arena(kRowFloats, 64, &pool);
    arena.ReserveChunkList(40);
    const int64_t list_bytes = arena.bytes();
    for (int i = 0; i < 40; ++i) {
      arena.ReserveOneMore();
      float* row = arena.row(arena.Append());
      for (int f = 0; f < kRowFloats; ++f) row[f] = static_cast<float>(i * kRowFloats + f);
    }
    // 10 chunks, the first 3 from the pool; the list did not grow.
    EXPECT_EQ(0, pool.idle_bytes());
    EXPECT_EQ(list_bytes + 10 * chunk_bytes, arena.bytes());
    EXPECT_TRUE(pool.Owns(arena.row(0)));
    EXPECT_TRUE(pool.Owns(arena.row(11)));
    EXPECT_FALSE(pool.Owns(arena.row(12)));
    for (int i = 0; i < 40; ++i) {
      for (int f = 0; f < kRowFloats; ++f) {
        ASSERT_EQ(static_cast<float>(i * kRowFloats + f), arena.row(i)[f]) << i;
      }
    }
    // Emptied chunks go back where they came from: pool chunks to the pool.
    for (int i = 0; i < 36; ++i) arena.RemoveLast();
    EXPECT_EQ(chunk_bytes, pool.idle_bytes());  // chunk 2; chunk 1 is the spare
    EXPECT_EQ(3.0f, arena.row(0)[3]);
  }
  // And the rest when the arena goes.
  EXPECT_EQ(3 * chunk_bytes, pool.idle_bytes());
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
