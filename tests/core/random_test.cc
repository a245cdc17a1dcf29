#include "core/random.h"

#include <cmath>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace ember {
namespace {

TEST(RandomStreamTest, SameSeedAndStreamGiveSameSequence) {
  RandomStream a(42, 3), b(42, 3);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.NextU64(), b.NextU64());
}

TEST(RandomStreamTest, DifferentStreamsDiffer) {
  RandomStream a(42, 0), b(42, 1), c(43, 0);
  const uint64_t x = a.NextU64();
  EXPECT_NE(x, b.NextU64());
  EXPECT_NE(x, c.NextU64());
}

TEST(RandomStreamTest, SequenceIsPinnedAcrossPlatforms) {
  // Golden values: the stream is a pure function of (seed, stream), so a
  // change here breaks reproducibility of every saved experiment.
  RandomStream stream(1, 0);
  EXPECT_EQ(0x8d7aecaf722fc711ULL, stream.NextU64());
  EXPECT_EQ(0x14dadd092c596b88ULL, stream.NextU64());
  EXPECT_EQ(0x91af90fb696eaec2ULL, stream.NextU64());
}

// NextBelow (the epoch permutations) and UniformAt (the initial embedding
// rows) are pinned too: tools/bench/ember_random.py reproduces them and
// tests/tools/bench_data_test.py pins the same numbers.
TEST(RandomStreamTest, NextBelowAndUniformAtArePinnedAcrossPlatforms) {
  RandomStream stream(3, 9);
  EXPECT_EQ(0u, stream.NextBelow(1));
  EXPECT_EQ(0u, stream.NextBelow(2));
  EXPECT_EQ(2u, stream.NextBelow(3));
  EXPECT_EQ(4u, stream.NextBelow(10));
  EXPECT_EQ(351903317958ULL, stream.NextBelow((1ULL << 40) + 7));
  EXPECT_EQ(7856676843066978251ULL, stream.NextBelow((1ULL << 63) + 5));
  EXPECT_EQ(0x1.294d45c694e84p-3, UniformAt(42, 123456789, 5));
}

TEST(RandomStreamTest, UniformDoublesHaveTheRightMoments) {
  RandomStream stream(7);
  double sum = 0, sum_sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double u = stream.NextDouble();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sum_sq += u * u;
  }
  EXPECT_NEAR(0.5, sum / n, 0.005);
  EXPECT_NEAR(1.0 / 12, sum_sq / n - (sum / n) * (sum / n), 0.002);
}

TEST(RandomStreamTest, NormalHasZeroMeanUnitVariance) {
  RandomStream stream(11);
  double sum = 0, sum_sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = stream.Normal();
    sum += x;
    sum_sq += x * x;
  }
  EXPECT_NEAR(0.0, sum / n, 0.01);
  EXPECT_NEAR(1.0, sum_sq / n, 0.02);
}

TEST(RandomStreamTest, NextBelowStaysInRangeAndCoversIt) {
  RandomStream stream(5);
  std::set<uint64_t> seen;
  for (int i = 0; i < 10000; ++i) {
    const uint64_t v = stream.NextBelow(7);
    ASSERT_LT(v, 7u);
    seen.insert(v);
  }
  EXPECT_EQ(7u, seen.size());
}

TEST(UniformAtTest, IsAPureFunctionOfSeedKeyAndIndex) {
  EXPECT_EQ(UniformAt(1, 99, 3), UniformAt(1, 99, 3));
  EXPECT_NE(UniformAt(1, 99, 3), UniformAt(2, 99, 3));
  EXPECT_NE(UniformAt(1, 99, 3), UniformAt(1, 98, 3));
  EXPECT_NE(UniformAt(1, 99, 3), UniformAt(1, 99, 4));
}

TEST(UnMix64Test, UndoesMix64) {
  for (uint64_t x : {uint64_t{0}, uint64_t{1}, ~uint64_t{0}, uint64_t{1} << 63}) {
    EXPECT_EQ(x, UnMix64(Mix64(x))) << x;
  }
  RandomStream stream(11);
  for (int i = 0; i < 100000; ++i) {
    const uint64_t x = stream.NextU64();
    ASSERT_EQ(x, UnMix64(Mix64(x))) << x;
    ASSERT_EQ(x, Mix64(UnMix64(x))) << x;
  }
}

}  // namespace
}  // namespace ember
