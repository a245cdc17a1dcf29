#include "io/feature_hash.h"

#include <cmath>
#include <limits>
#include <set>
#include <string>

#include <gtest/gtest.h>

namespace ember::io {
namespace {

// Keys are stored in checkpoints and embedding tables: they must never change.
// These values were computed once and are pinned here.
TEST(FeatureHashTest, KeysArePinnedAcrossMachinesAndReleases) {
  EXPECT_EQ(Key{0x001d08d4bf3cda49ULL}, HashCategorical(0, "68fd1e64"));
  EXPECT_EQ(Key{0x0668d33fceda44c1ULL}, HashCategorical(25, "9727dd16"));
  EXPECT_EQ(Key{0x01e9c2aadd9b8527ULL}, HashCategorical(7, "a"));
  EXPECT_EQ(Key{0x000038d4bf3cda49ULL}, HashCategorical(3, "68fd1e64", 20));
}

TEST(FeatureHashTest, SlotIsStoredInTheHighBits) {
  for (const int slot_bits : {1, 10, 20, 32}) {
    const int max_slot = slot_bits >= 31 ? 1 << 30 : (1 << slot_bits) - 1;
    for (const int slot : {0, 1, max_slot / 2, max_slot}) {
      EXPECT_EQ(slot, SlotOfKey(HashCategorical(slot, "68fd1e64", slot_bits), slot_bits))
          << "slot " << slot << " slot_bits " << slot_bits;
      EXPECT_EQ(slot, SlotOfKey(HashCategorical(slot, "", slot_bits), slot_bits));
    }
  }
}

TEST(FeatureHashTest, MissingValueHasAKeyOfItsOwnInEachSlot) {
  for (const int slot : {0, 5, 1023}) {
    const Key missing = HashCategorical(slot, "");
    EXPECT_EQ(static_cast<Key>(slot) << (64 - kDefaultSlotBits), missing);
    for (int v = 0; v < 10000; ++v) {
      ASSERT_NE(missing, HashCategorical(slot, std::to_string(v)));
    }
    EXPECT_NE(missing, HashCategorical(slot, std::string(1, '\0')));
    EXPECT_NE(missing, HashCategorical(slot, " "));
  }
}

TEST(FeatureHashTest, DistinctValuesAndSlotsGiveDistinctKeys) {
  std::set<Key> keys;
  for (int slot = 0; slot < 26; ++slot) {
    for (int v = 0; v < 2000; ++v) keys.insert(HashCategorical(slot, std::to_string(v)));
  }
  EXPECT_EQ(26u * 2000u, keys.size());
}

TEST(FeatureHashTest, HashDependsOnlyOnTheBytesOfTheValue) {
  const std::string owned = "68fd1e64";
  EXPECT_EQ(HashCategorical(4, owned),
            HashCategorical(4, std::string_view("x68fd1e64x").substr(1, 8)));
}

struct LogCase {
  double x;
  float expected;
};

TEST(FeatureHashTest, LogTransformIsLog1pOfPositivesAndZeroOtherwise) {
  const LogCase cases[] = {
      {0.0, 0.0f},
      {-1.0, 0.0f},
      {-2.0, 0.0f},
      {1.0, static_cast<float>(std::log(2.0))},
      {1618112.0, static_cast<float>(std::log1p(1618112.0))},
      {std::numeric_limits<double>::quiet_NaN(), 0.0f},
  };
  for (const LogCase& c : cases) {
    EXPECT_FLOAT_EQ(c.expected, LogTransform(c.x)) << "x = " << c.x;
  }
}

}  // namespace
}  // namespace ember::io
