// Float and bfloat16 storage of row weights (embedding/internal/row_weights.h).

#include "embedding/internal/row_weights.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "core/random.h"

namespace ember::embedding::internal {
namespace {

float Bf16Value(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

// The weights `in` narrowed by StoreWeights and widened back.
std::vector<float> RoundTrip(const std::vector<float>& in) {
  const int dim = static_cast<int>(in.size());
  std::vector<float> words(WeightWords(WeightStorage::kBFloat16, dim) + 1, -5.0f);
  StoreWeights(WeightStorage::kBFloat16, dim, in.data(), words.data());
  EXPECT_EQ(words.back(), -5.0f) << "wrote past the row's words";
  std::vector<float> out(dim);
  LoadWeights(WeightStorage::kBFloat16, dim, words.data(), out.data());
  return out;
}

TEST(RowWeightsTest, BFloat16TakesHalfTheWordsRoundedUp) {
  EXPECT_EQ(WeightWords(WeightStorage::kFloat32, 7), 7);
  EXPECT_EQ(WeightWords(WeightStorage::kBFloat16, 1), 1);
  EXPECT_EQ(WeightWords(WeightStorage::kBFloat16, 7), 4);
  EXPECT_EQ(WeightWords(WeightStorage::kBFloat16, 32), 16);
}

TEST(RowWeightsTest, Float32StorageIsACopy) {
  const std::vector<float> in = {0.1f, -3.75e-9f, 1e30f, -0.0f, 7.0f};
  std::vector<float> words(5), out(5);
  StoreUpdatedWeights(WeightStorage::kFloat32, 5, in.data(), 99, words.data());
  LoadWeights(WeightStorage::kFloat32, 5, words.data(), out.data());
  for (int e = 0; e < 5; ++e) EXPECT_EQ(std::bit_cast<uint32_t>(out[e]), std::bit_cast<uint32_t>(in[e]));
}

TEST(RowWeightsTest, NearestRoundingIsExactForBFloat16ValuesAndTiesGoToEven) {
  // Values that are bfloat16 already come back bit for bit (a checkpoint of
  // a bfloat16 table restores exactly), odd and even dims alike.
  std::vector<float> exact;
  for (uint16_t bits : {0x0000, 0x8000, 0x3f80, 0xbf80, 0x3e4d, 0x0001, 0x7f7f, 0xff80}) {
    exact.push_back(Bf16Value(bits));
  }
  exact.push_back(Bf16Value(0x4049));  // 9 values: an odd dim
  const std::vector<float> back = RoundTrip(exact);
  for (size_t e = 0; e < exact.size(); ++e) {
    EXPECT_EQ(std::bit_cast<uint32_t>(back[e]), std::bit_cast<uint32_t>(exact[e])) << e;
  }
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: to even, 1. 1 + 3 * 2^-8
  // lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6: to even, 1 + 2^-6.
  // Just above the first halfway point rounds up.
  const std::vector<float> ties = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f,
                                   -(1.0f + 0x1p-8f)};
  const std::vector<float> rounded = RoundTrip(ties);
  // RoundWeights rounds in place as the round trip does.
  std::vector<float> in_place = ties;
  RoundWeights(WeightStorage::kBFloat16, static_cast<int>(in_place.size()), in_place.data());
  EXPECT_EQ(in_place, rounded);
  EXPECT_EQ(rounded[0], 1.0f);
  EXPECT_EQ(rounded[1], 1.0f + 0x1p-6f);
  EXPECT_EQ(rounded[2], 1.0f + 0x1p-7f);
  EXPECT_EQ(rounded[3], -1.0f);
}

TEST(RowWeightsTest, NaNAndInfinitySurviveBothRoundings) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> in = {std::numeric_limits<float>::quiet_NaN(), inf, -inf,
                                 std::numeric_limits<float>::max()};
  for (bool stochastic : {false, true}) {
    std::vector<float> words(2), out(4);
    if (stochastic) {
      StoreUpdatedWeights(WeightStorage::kBFloat16, 4, in.data(), 1234, words.data());
    } else {
      StoreWeights(WeightStorage::kBFloat16, 4, in.data(), words.data());
    }
    LoadWeights(WeightStorage::kBFloat16, 4, words.data(), out.data());
    EXPECT_TRUE(std::isnan(out[0])) << stochastic;
    EXPECT_EQ(out[1], inf) << stochastic;
    EXPECT_EQ(out[2], -inf) << stochastic;
    if (stochastic) {
      // The largest float is finite; stochastic rounding never makes it inf.
      EXPECT_TRUE(std::isfinite(out[3]));
    }
  }
}

TEST(RowWeightsTest, StochasticRoundingPicksANeighbourWithoutBiasAndReproduces) {
  // x = lo + 0.3 * gap between two neighbouring bfloat16 values lo and hi,
  // for a positive and a negative x: each draw gives lo or hi, hi about 30%
  // of the time (so the mean stays x), and the same input gives the same
  // bits.
  for (float sign : {1.0f, -1.0f}) {
    const float lo = sign * Bf16Value(0x3e4d);  // ~0.2002
    const float hi = sign * Bf16Value(0x3e4e);
    const float x = lo + 0.3f * (hi - lo);
    constexpr int kDraws = 20000;
    int up = 0;
    double sum = 0;
    RandomStream keys(5, 0);
    for (int i = 0; i < kDraws; ++i) {
      // Two weights: the second varies the draw's seed as an update would.
      const float in[2] = {x, static_cast<float>(i)};
      float words[1];
      const uint64_t key_hash = keys.NextU64();
      StoreUpdatedWeights(WeightStorage::kBFloat16, 2, in, key_hash, words);
      float out[2];
      LoadWeights(WeightStorage::kBFloat16, 2, words, out);
      ASSERT_TRUE(out[0] == lo || out[0] == hi) << out[0];
      up += out[0] == hi;
      sum += out[0];
      float again[1];
      StoreUpdatedWeights(WeightStorage::kBFloat16, 2, in, key_hash, again);
      ASSERT_EQ(std::bit_cast<uint32_t>(again[0]), std::bit_cast<uint32_t>(words[0]));
    }
    // Binomial(20000, 0.3): standard deviation 0.0032 of the fraction.
    EXPECT_NEAR(static_cast<double>(up) / kDraws, 0.3, 0.02) << sign;
    EXPECT_NEAR(sum / kDraws, x, 0.02 * std::abs(hi - lo)) << sign;
  }
}

TEST(RowWeightsTest, StochasticRoundingMovesAWeightByUpdatesBelowHalfAStep) {
  // 1000 updates of -1e-4 from 0.5 (bfloat16 steps are 2^-8 = 0.0039 there)
  // are lost to nearest rounding, but move the weight to about 0.4 with
  // stochastic rounding.
  float nearest[1], stochastic[1];
  const float start = 0.5f;
  StoreWeights(WeightStorage::kBFloat16, 1, &start, nearest);
  StoreWeights(WeightStorage::kBFloat16, 1, &start, stochastic);
  for (int i = 0; i < 1000; ++i) {
    float w;
    LoadWeights(WeightStorage::kBFloat16, 1, nearest, &w);
    w -= 1e-4f;
    StoreWeights(WeightStorage::kBFloat16, 1, &w, nearest);
    LoadWeights(WeightStorage::kBFloat16, 1, stochastic, &w);
    w -= 1e-4f;
    StoreUpdatedWeights(WeightStorage::kBFloat16, 1, &w, Mix64(i), stochastic);
  }
  float w_nearest, w_stochastic;
  LoadWeights(WeightStorage::kBFloat16, 1, nearest, &w_nearest);
  LoadWeights(WeightStorage::kBFloat16, 1, stochastic, &w_stochastic);
  EXPECT_EQ(w_nearest, 0.5f);
  EXPECT_NEAR(w_stochastic, 0.4f, 0.05f);
}

}  // namespace
}  // namespace ember::embedding::internal
