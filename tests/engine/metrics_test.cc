#include "engine/metrics.h"

#include <cmath>

#include <gtest/gtest.h>

namespace ember::engine {
namespace {

TEST(AucTest, PerfectRankingIsOneAndReversedIsZero) {
  EXPECT_DOUBLE_EQ(1.0, ComputeAuc({0.1f, 0.2f, 0.8f, 0.9f}, {0, 0, 1, 1}));
  EXPECT_DOUBLE_EQ(0.0, ComputeAuc({0.9f, 0.8f, 0.2f, 0.1f}, {0, 0, 1, 1}));
}

TEST(AucTest, TiedScoresCountOneHalf) {
  EXPECT_DOUBLE_EQ(0.5, ComputeAuc({0.3f, 0.3f, 0.3f, 0.3f}, {0, 1, 0, 1}));
}

TEST(AucTest, MatchesTheFractionOfCorrectlyOrderedPairs) {
  // Positives 0.35 and 0.8; negatives 0.1, 0.4, 0.35. Pairs (pos > neg):
  // 0.35: > 0.1 (1), < 0.4 (0), tie 0.35 (0.5); 0.8: 1 + 1 + 1. (1.5 + 3) / 6.
  EXPECT_DOUBLE_EQ(4.5 / 6.0, ComputeAuc({0.1f, 0.35f, 0.4f, 0.8f, 0.35f}, {0, 1, 0, 1, 0}));
}

TEST(AucTest, OneClassOnlyIsHalf) {
  EXPECT_DOUBLE_EQ(0.5, ComputeAuc({0.1f, 0.9f}, {1, 1}));
}

TEST(LogLossTest, MatchesTheFormulaAndClipsExtremes) {
  const double expected = -(std::log(0.8) + std::log(1 - 0.3)) / 2;
  EXPECT_NEAR(expected, ComputeLogLoss({0.8f, 0.3f}, {1, 0}), 1e-7);
  EXPECT_TRUE(std::isfinite(ComputeLogLoss({0.0f, 1.0f}, {1, 0})));
}

TEST(MetricsTest, CalibrationIsMeanPredictionOverPositiveRate) {
  Metrics m = ComputeMetrics({0.5f, 0.5f, 0.5f, 0.5f}, {1, 0, 0, 0});
  EXPECT_EQ(4, m.examples);
  EXPECT_DOUBLE_EQ(0.25, m.positive_rate);
  EXPECT_DOUBLE_EQ(2.0, m.calibration);
}

}  // namespace
}  // namespace ember::engine
