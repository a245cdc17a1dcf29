#include "ops/gradient_clipping.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"
#include "core/threads.h"
#include "tests/ops/gradient_check.h"
#include "tests/ops/test_tensors.h"

namespace ember::ops {
namespace {

using ::testing::ElementsAre;
using testing::ExpectAllClose;
using ::testing::FloatEq;
using ::testing::HasSubstr;
using testing::RandomTensor;
using testing::SameBits;
using testing::ToDouble;
using testing::Values;

std::vector<Tensor> Clones(const std::vector<Tensor>& tensors) {
  std::vector<Tensor> clones;
  for (const Tensor& t : tensors) clones.push_back(t.Clone());
  return clones;
}

bool SameBits(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!SameBits(a[i], b[i])) return false;
  }
  return true;
}

TEST(GradientClippingTest, ScalesHandMadeGradientsToMaxNorm) {
  // sqrt(3^2 + 4^2 + 12^2) = 13; max_norm 6.5 halves every value.
  std::vector<Tensor> grads = {Tensor::FromVector({3, -4}, {2}), Tensor::FromVector({12}, {1, 1})};
  Result<double> norm = ClipByGlobalNorm(6.5, &grads);
  ASSERT_TRUE(norm.ok()) << norm.status();
  EXPECT_EQ(13.0, *norm);
  EXPECT_THAT(Values(grads[0]), ElementsAre(FloatEq(1.5f), FloatEq(-2.0f)));
  EXPECT_THAT(Values(grads[1]), ElementsAre(FloatEq(6.0f)));
  Result<double> after = GlobalNorm(grads);
  ASSERT_TRUE(after.ok());
  EXPECT_NEAR(6.5, *after, 1e-6);
}

TEST(GradientClippingTest, LeavesGradientsWithinMaxNormUntouched) {
  const std::vector<Tensor> original = {Tensor::FromVector({3, -4}, {2}),
                                        Tensor::FromVector({12}, {1})};
  for (double max_norm : {13.0, 20.0}) {
    std::vector<Tensor> grads = Clones(original);
    Result<double> norm = ClipByGlobalNorm(max_norm, &grads);
    ASSERT_TRUE(norm.ok()) << norm.status();
    EXPECT_EQ(13.0, *norm);
    EXPECT_TRUE(SameBits(original, grads)) << max_norm;
  }
}

TEST(GradientClippingTest, MatchesDoubleReferenceOnRandomShapes) {
  RandomStream rng(3);
  const std::vector<std::vector<int64_t>> shapes = {{1}, {0}, {7, 3}, {40000}, {1, 1}, {5, 2, 9}};
  std::vector<Tensor> grads;
  for (const auto& shape : shapes) grads.push_back(RandomTensor(shape, rng, -2.0, 2.0));
  double sum = 0.0;
  for (const Tensor& g : grads) {
    for (double v : ToDouble(g)) sum += v * v;
  }
  const double expected_norm = std::sqrt(sum);
  const double max_norm = expected_norm / 3.0;
  const std::vector<Tensor> original = Clones(grads);
  Result<double> norm = ClipByGlobalNorm(max_norm, &grads);
  ASSERT_TRUE(norm.ok()) << norm.status();
  EXPECT_NEAR(expected_norm, *norm, 1e-12 * expected_norm);
  for (size_t t = 0; t < grads.size(); ++t) {
    std::vector<double> expected = ToDouble(original[t]);
    for (double& v : expected) v *= max_norm / expected_norm;
    ExpectAllClose(expected, grads[t], 1e-6, "grads[" + std::to_string(t) + "]");
  }
}

TEST(GradientClippingTest, NormIsIdenticalWithOneAndFourThreads) {
  RandomStream rng(4);
  // Many blocks, and a last block that is not full.
  const std::vector<Tensor> original = {RandomTensor({(int64_t{1} << 20) + 3}, rng),
                                        RandomTensor({777}, rng)};
  std::vector<double> norms;
  std::vector<std::vector<Tensor>> clipped;
  for (int threads : {1, 4}) {
    ThreadArena arena(threads);
    std::vector<Tensor> grads = Clones(original);
    arena.Execute([&] {
      Result<double> norm = ClipByGlobalNorm(1.0, &grads);
      ASSERT_TRUE(norm.ok()) << norm.status();
      norms.push_back(*norm);
    });
    clipped.push_back(grads);
  }
  ASSERT_EQ(2u, norms.size());
  EXPECT_EQ(0, std::memcmp(&norms[0], &norms[1], sizeof(double)));
  EXPECT_TRUE(SameBits(clipped[0], clipped[1]));
}

TEST(GradientClippingTest, NonFiniteNormIsReturnedAndNothingIsScaled) {
  for (float bad : {INFINITY, NAN}) {
    const std::vector<Tensor> original = {Tensor::FromVector({1, 2}, {2}),
                                          Tensor::FromVector({bad, 5}, {2})};
    std::vector<Tensor> grads = Clones(original);
    Result<double> norm = ClipByGlobalNorm(1.0, &grads);
    ASSERT_TRUE(norm.ok()) << norm.status();
    EXPECT_FALSE(std::isfinite(*norm));
    EXPECT_EQ(std::isnan(bad), std::isnan(*norm));
    EXPECT_TRUE(SameBits(original, grads));
  }
}

TEST(GradientClippingTest, EmptyListHasNormZero) {
  std::vector<Tensor> grads;
  Result<double> norm = ClipByGlobalNorm(1.0, &grads);
  ASSERT_TRUE(norm.ok()) << norm.status();
  EXPECT_EQ(0.0, *norm);
}

TEST(GradientClippingTest, BadArgumentsAreInvalidArguments) {
  std::vector<Tensor> grads = {Tensor::Zeros({2})};
  for (double max_norm : {0.0, -1.0, static_cast<double>(INFINITY), static_cast<double>(NAN)}) {
    Result<double> norm = ClipByGlobalNorm(max_norm, &grads);
    EXPECT_EQ(StatusCode::kInvalidArgument, norm.status().code()) << max_norm;
    EXPECT_THAT(norm.status().message(), HasSubstr("max_norm")) << max_norm;
  }
  Result<double> norm = ClipByGlobalNorm(1.0, nullptr);
  EXPECT_EQ(StatusCode::kInvalidArgument, norm.status().code());
  EXPECT_THAT(norm.status().message(), HasSubstr("grads is null"));

  grads = {Tensor::Zeros({2}), Tensor::Zeros({2}, DType::kI32)};
  norm = ClipByGlobalNorm(1.0, &grads);
  EXPECT_EQ(StatusCode::kInvalidArgument, norm.status().code());
  EXPECT_THAT(norm.status().message(), HasSubstr("grads[1] must be an f32 tensor"));
  grads = {Tensor()};
  norm = GlobalNorm(grads);
  EXPECT_EQ(StatusCode::kInvalidArgument, norm.status().code());
  EXPECT_THAT(norm.status().message(), HasSubstr("grads[0]"));
}

TEST(GradientClippingTest, CostIsThreeFlopsAndTwelveBytesPerElement) {
  EXPECT_EQ(300.0, ClipByGlobalNormCost(100).flops);
  EXPECT_EQ(1200.0, ClipByGlobalNormCost(100).bytes);
}

}  // namespace
}  // namespace ember::ops
