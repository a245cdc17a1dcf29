#include "embedding/internal/eviction_policy.h"

#include <cstdint>
#include <cstring>
#include <functional>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "embedding/internal/row_store.h"

namespace ember::embedding {
namespace {

// Rows of RowMeta only (key 2 floats, last_seen_step 2, frequency 1) and
// LRU's two link floats after it.
constexpr int64_t kMetaOffset = 0;
constexpr int64_t kLinksOffset = 5;
constexpr int64_t kRowFloats = 7;

class EvictionPolicyTest : public ::testing::Test {
 protected:
  EvictionPolicyTest() : rows_(kRowFloats, 4096) {}

  // Appends a row of `frequency` last seen at `seen_step`; returns its slot.
  int64_t AddRow(EvictionPolicy& policy, uint32_t frequency, int64_t seen_step) {
    rows_.ReserveOneMore();
    const int64_t slot = rows_.Append();
    float* row = rows_.row(slot);
    const Key key = static_cast<Key>(slot);
    std::memcpy(row + kMetaOffset, &key, sizeof(key));
    std::memcpy(row + kMetaOffset + 2, &seen_step, sizeof(seen_step));
    std::memcpy(row + kMetaOffset + 4, &frequency, sizeof(frequency));
    policy.Inserted(rows_, slot);
    return slot;
  }

  RowArena rows_;
};

EvictionPolicy Lfu() {
  return EvictionPolicy(EvictionPolicy::Kind::kLfu, kLinksOffset, kMetaOffset, 7);
}
EvictionPolicy Lru() {
  return EvictionPolicy(EvictionPolicy::Kind::kLru, kLinksOffset, kMetaOffset, 7);
}

const std::function<bool(int64_t)> kNoneSpared = [](int64_t) { return false; };

TEST_F(EvictionPolicyTest, LfuPicksTheLeastFrequentRowOfTwo) {
  EvictionPolicy policy = Lfu();
  AddRow(policy, 9, 1);
  const int64_t cold = AddRow(policy, 2, 1);
  // Eight samples of two rows miss the cold one with chance 2^-8 per pick.
  int picked_cold = 0;
  for (int i = 0; i < 100; ++i) {
    int64_t passes = 0;
    picked_cold += policy.PickVictim(rows_, rows_.size(), 5, kNoneSpared, &passes) == cold;
  }
  EXPECT_GE(picked_cold, 95);
}

TEST_F(EvictionPolicyTest, LfuRanksRowsPulledAtTheStepLast) {
  EvictionPolicy policy = Lfu();
  const int64_t old = AddRow(policy, 9, 3);
  AddRow(policy, 0, 5);  // new at step 5: the lowest frequency, but its Push is coming
  // Only a sample of the step's row alone picks it (chance 2^-8 per pick).
  int64_t passes = 0;
  int picked_old = 0;
  for (int i = 0; i < 100; ++i) {
    picked_old += policy.PickVictim(rows_, rows_.size(), 5, kNoneSpared, &passes) == old;
  }
  EXPECT_GE(picked_old, 95);
}

TEST_F(EvictionPolicyTest, LfuPassesOverASparedRowToTheNextColdest) {
  EvictionPolicy policy = Lfu();
  std::vector<int64_t> slots;
  for (uint32_t frequency = 0; frequency < 4; ++frequency) {
    slots.push_back(AddRow(policy, frequency, 1));
  }
  // The two coldest rows are spared (pinned for a coming Pull): every pick
  // is one of the other two, and each spared row it met cost one pass.
  const std::set<int64_t> spared_slots = {slots[0], slots[1]};
  int64_t calls = 0;
  const std::function<bool(int64_t)> spared = [&](int64_t slot) {
    ++calls;
    return spared_slots.count(slot) > 0;
  };
  for (int i = 0; i < 200; ++i) {
    int64_t passes = 1000;
    calls = 0;
    const int64_t victim = policy.PickVictim(rows_, rows_.size(), 5, spared, &passes);
    ASSERT_TRUE(victim == slots[2] || victim == slots[3]) << victim;
    EXPECT_EQ(calls - 1, 1000 - passes) << "one pass per spared row met";
    EXPECT_FALSE(spared_slots.count(victim));
  }
}

TEST_F(EvictionPolicyTest, LfuTakesTheColdestRowOnceNoPassIsLeft) {
  EvictionPolicy policy = Lfu();
  AddRow(policy, 0, 1);
  const std::function<bool(int64_t)> all_spared = [](int64_t) { return true; };
  // Every row is spared: the passes run out and the pick is made anyway, so
  // that a shard full of spared rows still gets within its budget.
  int64_t passes = 20;
  EXPECT_EQ(0, policy.PickVictim(rows_, rows_.size(), 5, all_spared, &passes));
  EXPECT_EQ(0, passes);
}

TEST_F(EvictionPolicyTest, LruMovesASparedTailToTheHotEnd) {
  EvictionPolicy policy = Lru();
  const int64_t a = AddRow(policy, 0, 1);  // the coldest
  const int64_t b = AddRow(policy, 0, 1);
  const int64_t c = AddRow(policy, 0, 1);  // the hottest
  int64_t passes = 10;
  const std::function<bool(int64_t)> spare_a = [&](int64_t slot) { return slot == a; };
  EXPECT_EQ(b, policy.PickVictim(rows_, rows_.size(), 5, spare_a, &passes));
  EXPECT_EQ(9, passes);
  // a went to the hot end: after b leaves, c is the coldest.
  policy.Removed(rows_, b);
  EXPECT_EQ(c, policy.PickVictim(rows_, rows_.size(), 5, kNoneSpared, &passes));
  EXPECT_EQ(9, passes);
}

TEST_F(EvictionPolicyTest, LruTakesTheTailOnceNoPassIsLeft) {
  EvictionPolicy policy = Lru();
  const int64_t a = AddRow(policy, 0, 1);
  AddRow(policy, 0, 1);
  const std::function<bool(int64_t)> all_spared = [](int64_t) { return true; };
  int64_t passes = 3;
  // Three passes rotate a, b, a to the hot end; the tail is then b.
  const int64_t victim = policy.PickVictim(rows_, rows_.size(), 5, all_spared, &passes);
  EXPECT_EQ(0, passes);
  EXPECT_NE(a, victim);
}

}  // namespace
}  // namespace ember::embedding
