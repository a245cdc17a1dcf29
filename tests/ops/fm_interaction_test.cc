#include "ops/fm_interaction.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"
#include "tests/ops/gradient_check.h"
#include "tests/ops/test_tensors.h"

namespace ember::ops {
namespace {

using ::testing::ElementsAre;
using testing::ExpectAllClose;
using ::testing::HasSubstr;
using testing::NanFilled;
using testing::NumericGradient;
using testing::RandomTensor;
using testing::ToDouble;
using testing::WeightedSum;

struct FmShape {
  int64_t batch;
  int64_t num_features;
  int64_t dim;
};

// The definition rather than the identity the op uses: the sum of <x_i, x_j>
// over every pair of fields i < j.
std::vector<double> ReferenceFm(const std::vector<double>& x, const FmShape& s) {
  std::vector<double> out(static_cast<size_t>(s.batch), 0.0);
  for (int64_t b = 0; b < s.batch; ++b) {
    const double* sample = x.data() + b * s.num_features * s.dim;
    for (int64_t i = 0; i < s.num_features; ++i) {
      for (int64_t j = i + 1; j < s.num_features; ++j) {
        for (int64_t d = 0; d < s.dim; ++d) out[b] += sample[i * s.dim + d] * sample[j * s.dim + d];
      }
    }
  }
  return out;
}

// Fixed shapes with batch 1, one field, one dimension and odd sizes, then
// random ones.
std::vector<FmShape> TestShapes() {
  std::vector<FmShape> shapes = {{1, 1, 1},  {1, 2, 1},  {1, 7, 5},   {3, 1, 4},
                                 {5, 3, 13}, {17, 9, 3}, {2, 26, 16}, {33, 5, 1}};
  RandomStream rng(2024);
  for (int i = 0; i < 6; ++i) {
    shapes.push_back({1 + static_cast<int64_t>(rng.NextBelow(20)),
                      1 + static_cast<int64_t>(rng.NextBelow(12)),
                      1 + static_cast<int64_t>(rng.NextBelow(20))});
  }
  return shapes;
}

TEST(FmInteractionTest, ForwardSumsThePairwiseDotProductsOfAHandExample) {
  // Fields (1, 0), (2, 1), (3, -1): 2 + (3 + 0) + (6 - 1) = 10.
  const Tensor features = Tensor::FromVector({1, 0, 2, 1, 3, -1}, {1, 3, 2});
  Tensor out = Tensor::Empty({1, 1});
  ASSERT_TRUE(FmInteractionForward(features, &out).ok());
  EXPECT_FLOAT_EQ(10.0f, out.data<float>()[0]);
}

TEST(FmInteractionTest, BackwardOfAHandExampleIsDoutTimesTheSumOfTheOtherFields) {
  const Tensor features = Tensor::FromVector({1, 0, 2, 1, 3, -1}, {1, 3, 2});
  const Tensor dout = Tensor::FromVector({2}, {1, 1});
  Tensor dfeatures = Tensor::Empty({1, 3, 2});
  ASSERT_TRUE(FmInteractionBackward(features, dout, &dfeatures).ok());
  const float* v = dfeatures.data<float>();
  // Field sum (6, 0); field f gets 2 * ((6, 0) - x_f).
  EXPECT_THAT(std::vector<float>(v, v + 6), ElementsAre(10, 0, 8, -2, 6, 2));
}

TEST(FmInteractionTest, ForwardMatchesDoubleReferenceAndBackwardMatchesFiniteDifferences) {
  for (const FmShape& s : TestShapes()) {
    SCOPED_TRACE(::testing::Message()
                 << "B=" << s.batch << " F=" << s.num_features << " D=" << s.dim);
    RandomStream rng(s.batch * 10000 + s.num_features * 100 + s.dim);
    const Tensor features = RandomTensor({s.batch, s.num_features, s.dim}, rng);
    const Tensor dout = RandomTensor({s.batch, 1}, rng);
    // NaN in the outputs shows that every element is overwritten.
    Tensor out = NanFilled({s.batch, 1});
    ASSERT_TRUE(FmInteractionForward(features, &out).ok());
    const std::vector<double> x = ToDouble(features);
    ExpectAllClose(ReferenceFm(x, s), out, 1e-5, "out");

    Tensor dfeatures = NanFilled({s.batch, s.num_features, s.dim});
    ASSERT_TRUE(FmInteractionBackward(features, dout, &dfeatures).ok());
    const std::vector<double> g = ToDouble(dout);
    ExpectAllClose(
        NumericGradient(
            [&](const std::vector<double>& v) { return WeightedSum(g, ReferenceFm(v, s)); }, x),
        dfeatures, 1e-4, "dfeatures");
  }
}

TEST(FmInteractionTest, EmptyBatchSucceeds) {
  const Tensor features = Tensor::Empty({0, 3, 4});
  Tensor out = Tensor::Empty({0, 1});
  EXPECT_TRUE(FmInteractionForward(features, &out).ok());
  Tensor dfeatures = Tensor::Empty({0, 3, 4});
  EXPECT_TRUE(FmInteractionBackward(features, Tensor::Empty({0, 1}), &dfeatures).ok());
}

TEST(FmInteractionTest, MismatchedShapesAndDtypesAreInvalidArguments) {
  const Tensor features = Tensor::Zeros({2, 4, 3});
  Tensor out = Tensor::Empty({2, 1});

  Status status = FmInteractionForward(Tensor::Zeros({2, 12}), &out);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("features must be a 3-d f32"));

  status = FmInteractionForward(Tensor::Zeros({2, 4, 3}, DType::kI32), &out);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("features"));

  Tensor wrong_out = Tensor::Empty({2});
  status = FmInteractionForward(features, &wrong_out);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("FmInteractionForward: out must be f32[2, 1]"));

  status = FmInteractionForward(features, nullptr);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("out is null"));

  Tensor dfeatures = Tensor::Empty({2, 4, 3});
  status = FmInteractionBackward(features, Tensor::Zeros({3, 1}), &dfeatures);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("dout must be f32[2, 1]"));

  Tensor wrong = Tensor::Empty({2, 3, 4});
  status = FmInteractionBackward(features, Tensor::Zeros({2, 1}), &wrong);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("dfeatures must be f32[2, 4, 3]"));

  status = FmInteractionBackward(features, Tensor::Zeros({2, 1}), nullptr);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("dfeatures is null"));
}

TEST(FmInteractionTest, CostsOfASmallShapeMatchAHandCount) {
  // B=2, F=3, D=4. Forward per (sample, d): 3 adds to the field sum, 3
  // squares, 3 adds to the sum of squares, then square, subtract, accumulate:
  // 12; times 8 (sample, d) pairs is 96, plus one halving per sample: 98.
  // It reads 24 floats and writes 2: 104 bytes.
  const OpCost forward = FmInteractionForwardCost(2, 3, 4);
  EXPECT_DOUBLE_EQ(98.0, forward.flops);
  EXPECT_DOUBLE_EQ(104.0, forward.bytes);
  // Backward: 24 adds for the field sums, then a subtract and a multiply per
  // output element: 24 + 48 = 72. Reads 24 + 2 floats, writes 24: 200 bytes.
  const OpCost backward = FmInteractionBackwardCost(2, 3, 4);
  EXPECT_DOUBLE_EQ(72.0, backward.flops);
  EXPECT_DOUBLE_EQ(200.0, backward.bytes);
}

}  // namespace
}  // namespace ember::ops
