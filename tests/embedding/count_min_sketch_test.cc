#include "embedding/internal/count_min_sketch.h"

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "core/random.h"

namespace ember::embedding {
namespace {

TEST(CountMinSketchTest, EstimatesAreExactForFewKeysInAWideSketch) {
  CountMinSketch sketch(1 << 16, 4, 7);
  for (Key key = 0; key < 50; ++key) {
    for (Key i = 0; i <= key; ++i) EXPECT_EQ(i + 1, sketch.Add(key));
  }
  for (Key key = 0; key < 50; ++key) EXPECT_EQ(key + 1, sketch.Estimate(key));
  EXPECT_EQ(0u, sketch.Estimate(1000));
}

TEST(CountMinSketchTest, EstimatesNeverUndercountInACrowdedSketch) {
  CountMinSketch sketch(256, 3, 1);
  std::vector<uint32_t> truth(5000, 0);
  RandomStream random(2);
  for (int i = 0; i < 50000; ++i) {
    const Key key = random.NextBelow(truth.size());
    ++truth[key];
    sketch.Add(key);
  }
  int64_t overcount = 0;
  for (Key key = 0; key < truth.size(); ++key) {
    ASSERT_GE(sketch.Estimate(key), truth[key]) << key;
    overcount += sketch.Estimate(key) - truth[key];
  }
  EXPECT_GT(overcount, 0);  // it is crowded: collisions happened
}

TEST(CountMinSketchTest, WidthRoundsUpToAPowerOfTwoAndBytesCountEveryCounter) {
  CountMinSketch sketch(1000, 5, 0);
  EXPECT_EQ(1024, sketch.width());
  EXPECT_EQ(5, sketch.depth());
  EXPECT_EQ(1024 * 5 * 4, sketch.bytes());
}

TEST(CountMinSketchTest, DifferentSeedsCollideDifferently) {
  CountMinSketch a(4, 1, 1);
  CountMinSketch b(4, 1, 2);
  int64_t differ = 0;
  for (Key key = 0; key < 64; ++key) {
    a.Add(key);
    b.Add(key);
  }
  for (Key key = 0; key < 64; ++key) differ += a.Estimate(key) != b.Estimate(key);
  EXPECT_GT(differ, 0);
}

}  // namespace
}  // namespace ember::embedding
