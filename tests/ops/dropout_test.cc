#include "ops/dropout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"
#include "core/threads.h"
#include "tests/ops/gradient_check.h"
#include "tests/ops/test_tensors.h"

namespace ember::ops {
namespace {

using testing::ExpectAllClose;
using ::testing::HasSubstr;
using testing::NumericGradient;
using testing::RandomTensor;
using testing::SameBits;
using testing::ToDouble;
using testing::WeightedSum;

// The documented mask: element i of `step` is kept iff
// UniformAt(seed, step, i) >= rate.
std::vector<double> ReferenceDropout(const std::vector<double>& x, const DropoutOptions& options,
                                     uint64_t step) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const bool keep = UniformAt(options.seed, step, i) >= options.rate;
    y[i] = keep ? x[i] / (1.0 - options.rate) : 0.0;
  }
  return y;
}

TEST(DropoutOpsTest, ForwardMatchesReferenceMaskAndBackwardMatchesFiniteDifferences) {
  const std::vector<std::vector<int64_t>> shapes = {{1}, {1, 7}, {3, 5}, {17, 33}, {2, 3, 4}};
  for (const std::vector<int64_t>& shape : shapes) {
    for (double rate : {0.1, 0.5, 0.9}) {
      SCOPED_TRACE(::testing::Message() << "numel=" << shape.back() << " rate=" << rate);
      RandomStream rng(static_cast<uint64_t>(rate * 1000) + shape.back());
      const DropoutOptions options{rate, /*seed=*/1234};
      const uint64_t step = 77;
      const Tensor x = RandomTensor(shape, rng);
      Tensor y = Tensor::Empty(shape);
      ASSERT_TRUE(DropoutForward(x, options, step, &y).ok());
      const std::vector<double> xd = ToDouble(x);
      ExpectAllClose(ReferenceDropout(xd, options, step), y, 1e-6, "y");

      const Tensor dy = RandomTensor(shape, rng);
      Tensor dx = Tensor::Empty(shape);
      ASSERT_TRUE(DropoutBackward(dy, options, step, &dx).ok());
      const std::vector<double> g = ToDouble(dy);
      ExpectAllClose(NumericGradient(
                         [&](const std::vector<double>& v) {
                           return WeightedSum(g, ReferenceDropout(v, options, step));
                         },
                         xd),
                     dx, 1e-4, "dx");
    }
  }
}

TEST(DropoutOpsTest, RateZeroIsAnExactCopyAlsoInPlace) {
  RandomStream rng(5);
  const Tensor x = RandomTensor({13, 9}, rng, -1e6, 1e6);
  Tensor y = Tensor::Empty({13, 9});
  ASSERT_TRUE(DropoutForward(x, DropoutOptions{}, 3, &y).ok());
  EXPECT_TRUE(SameBits(x, y));
  Tensor in_place = x.Clone();
  ASSERT_TRUE(DropoutBackward(in_place, DropoutOptions{}, 3, &in_place).ok());
  EXPECT_TRUE(SameBits(x, in_place));
}

TEST(DropoutOpsTest, InPlaceForwardEqualsOutOfPlace) {
  RandomStream rng(6);
  const Tensor x = RandomTensor({1001}, rng);
  const DropoutOptions options{0.4, 9};
  Tensor y = Tensor::Empty({1001});
  ASSERT_TRUE(DropoutForward(x, options, 2, &y).ok());
  Tensor in_place = x.Clone();
  ASSERT_TRUE(DropoutForward(in_place, options, 2, &in_place).ok());
  EXPECT_TRUE(SameBits(y, in_place));
}

TEST(DropoutOpsTest, MaskIsIdenticalWithOneAndFourThreads) {
  // Large enough for many parallel chunks.
  const int64_t n = (int64_t{1} << 18) + 5;
  RandomStream rng(7);
  const Tensor x = RandomTensor({n}, rng);
  const DropoutOptions options{0.3, 11};
  std::vector<Tensor> forwards, backwards;
  for (int threads : {1, 4}) {
    ThreadArena arena(threads);
    Tensor y = Tensor::Empty({n}), dx = Tensor::Empty({n});
    arena.Execute([&] {
      ASSERT_TRUE(DropoutForward(x, options, 5, &y).ok());
      ASSERT_TRUE(DropoutBackward(x, options, 5, &dx).ok());
    });
    forwards.push_back(y);
    backwards.push_back(dx);
  }
  EXPECT_TRUE(SameBits(forwards[0], forwards[1]));
  EXPECT_TRUE(SameBits(backwards[0], backwards[1]));
  // Forward and backward of the same step apply the same mask.
  EXPECT_TRUE(SameBits(forwards[0], backwards[0]));
}

// Fraction of elements of `y` (the dropout of ones) that were kept.
double KeptFraction(const Tensor& y) {
  int64_t kept = 0;
  for (int64_t i = 0; i < y.numel(); ++i) kept += y.data<float>()[i] != 0.0f;
  return static_cast<double>(kept) / static_cast<double>(y.numel());
}

TEST(DropoutOpsTest, KeptFractionIsNearOneMinusRateAndKeptValuesAreScaled) {
  const int64_t n = int64_t{1} << 20;
  const Tensor ones = Tensor::FromVector(std::vector<float>(n, 1.0f), {n});
  for (double rate : {0.1, 0.3, 0.7}) {
    SCOPED_TRACE(rate);
    Tensor y = Tensor::Empty({n});
    ASSERT_TRUE(DropoutForward(ones, DropoutOptions{rate, 21}, 0, &y).ok());
    // The standard deviation of the fraction is below 5e-4; allow 10 of them.
    EXPECT_NEAR(1.0 - rate, KeptFraction(y), 5e-3);
    const float scale = static_cast<float>(1.0 / (1.0 - rate));
    for (int64_t i = 0; i < n; ++i) {
      const float v = y.data<float>()[i];
      if (v != 0.0f) {
        ASSERT_EQ(scale, v) << "element " << i;
      }
    }
  }
}

TEST(DropoutOpsTest, StepsAndSeedsDrawDifferentMasks) {
  const int64_t n = 1 << 16;
  const Tensor ones = Tensor::FromVector(std::vector<float>(n, 1.0f), {n});
  Tensor a = Tensor::Empty({n}), b = Tensor::Empty({n}), c = Tensor::Empty({n});
  ASSERT_TRUE(DropoutForward(ones, DropoutOptions{0.5, 1}, 0, &a).ok());
  ASSERT_TRUE(DropoutForward(ones, DropoutOptions{0.5, 1}, 1, &b).ok());
  ASSERT_TRUE(DropoutForward(ones, DropoutOptions{0.5, 2}, 0, &c).ok());
  int64_t same_step = 0, same_seed = 0;
  for (int64_t i = 0; i < n; ++i) {
    same_step += a.data<float>()[i] == b.data<float>()[i];
    same_seed += a.data<float>()[i] == c.data<float>()[i];
  }
  // Independent masks agree on about half of the elements.
  EXPECT_NEAR(0.5, static_cast<double>(same_step) / n, 0.02);
  EXPECT_NEAR(0.5, static_cast<double>(same_seed) / n, 0.02);
}

TEST(DropoutOpsTest, BadRatesAndShapesAreInvalidArguments) {
  const Tensor x = Tensor::Zeros({2, 3});
  Tensor y = Tensor::Empty({2, 3});
  for (double rate : {1.0, -0.1, 1.5, static_cast<double>(NAN)}) {
    Status status = DropoutForward(x, DropoutOptions{rate, 0}, 0, &y);
    EXPECT_EQ(StatusCode::kInvalidArgument, status.code()) << rate;
    EXPECT_THAT(status.message(), HasSubstr("rate = ")) << rate;
  }
  Tensor wrong = Tensor::Empty({3, 2});
  Status status = DropoutForward(x, DropoutOptions{0.5, 0}, 0, &wrong);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("y must be f32[2, 3]"));
  status = DropoutBackward(x, DropoutOptions{0.5, 0}, 0, nullptr);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("dx is null"));
  status = DropoutForward(Tensor::Zeros({2, 3}, DType::kI32), DropoutOptions{0.5, 0}, 0, &y);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("x must be an f32 tensor"));
  status = DropoutBackward(Tensor(), DropoutOptions{0.5, 0}, 0, &y);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("dy must be an f32 tensor"));
}

TEST(DropoutOpsTest, CostIsOneMultiplyAndEightBytesPerElement) {
  EXPECT_EQ(1000.0, DropoutCost(1000).flops);
  EXPECT_EQ(8000.0, DropoutCost(1000).bytes);
}

}  // namespace
}  // namespace ember::ops
