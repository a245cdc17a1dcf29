#include <cstdint>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/random.h"
#include "core/tensor.h"
#include "ops/dense_ops.h"
#include "tests/ops/gradient_check.h"

namespace ember::ops {
namespace {

using ::testing::ElementsAre;
using testing::ExpectAllClose;
using ::testing::HasSubstr;
using testing::NumericGradient;
using testing::RandomTensor;
using testing::ToDouble;
using testing::WeightedSum;

std::vector<double> ReferenceInteraction(const std::vector<double>& f, int64_t batch,
                                         int64_t num_features, int64_t dim) {
  std::vector<double> out;
  for (int64_t b = 0; b < batch; ++b) {
    const double* s = f.data() + b * num_features * dim;
    for (int64_t i = 0; i < num_features; ++i) {
      for (int64_t j = 0; j < i; ++j) {
        double dot = 0.0;
        for (int64_t d = 0; d < dim; ++d) dot += s[i * dim + d] * s[j * dim + d];
        out.push_back(dot);
      }
    }
  }
  return out;
}

TEST(DotInteractionOpsTest, PairsComeInLowerTriangleOrderRowByRow) {
  // One-dimensional features 1, 2, 3, 5: every pair has a distinct product.
  const Tensor features = Tensor::FromVector({1, 2, 3, 5}, {1, 4, 1});
  Tensor out = Tensor::Empty({1, 6});
  ASSERT_TRUE(DotInteractionForward(features, &out).ok());
  const float* v = out.data<float>();
  // (1,0) (2,0) (2,1) (3,0) (3,1) (3,2)
  EXPECT_THAT(std::vector<float>(v, v + 6), ElementsAre(2, 3, 6, 5, 10, 15));
}

// Small shapes, plus shapes that cross the kernels' 16-lane blocks (more
// than 16 features, dims of 16 and more with and without a remainder).
std::vector<std::vector<int64_t>> InteractionShapes() {
  std::vector<std::vector<int64_t>> shapes;
  for (int64_t batch : {1, 3, 17}) {
    for (int64_t num_features : {1, 2, 5, 9}) {
      for (int64_t dim : {1, 4, 13}) shapes.push_back({batch, num_features, dim});
    }
  }
  for (const std::vector<int64_t>& large :
       {std::vector<int64_t>{2, 17, 16}, {2, 27, 35}, {3, 20, 32}, {1, 33, 5}, {2, 32, 16}}) {
    shapes.push_back(large);
  }
  return shapes;
}

TEST(DotInteractionOpsTest, ForwardMatchesDoubleReferenceAndBackwardMatchesFiniteDifferences) {
  for (const std::vector<int64_t>& shape : InteractionShapes()) {
    const int64_t batch = shape[0], num_features = shape[1], dim = shape[2];
    SCOPED_TRACE(::testing::Message() << "B=" << batch << " F=" << num_features << " D=" << dim);
    const int64_t pairs = num_features * (num_features - 1) / 2;
    RandomStream rng(batch * 10000 + num_features * 100 + dim);
    const Tensor features = RandomTensor({batch, num_features, dim}, rng);
    const Tensor dout = RandomTensor({batch, pairs}, rng);
    Tensor out = Tensor::Empty({batch, pairs});
    ASSERT_TRUE(DotInteractionForward(features, &out).ok());
    const std::vector<double> f = ToDouble(features);
    ExpectAllClose(ReferenceInteraction(f, batch, num_features, dim), out, 1e-5, "out");

    Tensor dfeatures = Tensor::Empty({batch, num_features, dim});
    ASSERT_TRUE(DotInteractionBackward(features, dout, &dfeatures).ok());
    const std::vector<double> g = ToDouble(dout);
    ExpectAllClose(NumericGradient(
                       [&](const std::vector<double>& v) {
                         return WeightedSum(g, ReferenceInteraction(v, batch, num_features, dim));
                       },
                       f),
                   dfeatures, 1e-4, "dfeatures");
  }
}

TEST(DotInteractionOpsTest, MismatchedShapesAreInvalidArguments) {
  const Tensor features = Tensor::Zeros({2, 4, 3});
  Tensor out = Tensor::Empty({2, 5});
  Status status = DotInteractionForward(features, &out);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("out must be f32[2, 6]"));

  status = DotInteractionForward(Tensor::Zeros({2, 12}), &out);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("features"));

  Tensor dfeatures = Tensor::Empty({2, 4, 3});
  status = DotInteractionBackward(features, Tensor::Zeros({2, 5}), &dfeatures);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("dout"));

  Tensor wrong = Tensor::Empty({2, 3, 4});
  status = DotInteractionBackward(features, Tensor::Zeros({2, 6}), &wrong);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("dfeatures"));
}

// The layer the dlrm_interaction node replaces: concat, dots, concat.
Tensor ComposedDlrmInteraction(const Tensor& direct, const Tensor& pooled) {
  const int64_t batch = direct.dim(0), dim = direct.dim(1);
  const int64_t features = pooled.dim(1) / dim + 1, pairs = features * (features - 1) / 2;
  Tensor all = Tensor::Empty({batch, features * dim});
  EXPECT_TRUE(ConcatColumns({direct, pooled}, &all).ok());
  Tensor dots = Tensor::Empty({batch, pairs});
  EXPECT_TRUE(DotInteractionForward(all.Reshape({batch, features, dim}), &dots).ok());
  Tensor out = Tensor::Empty({batch, dim + pairs});
  EXPECT_TRUE(ConcatColumns({direct, dots}, &out).ok());
  return out;
}

TEST(DlrmInteractionOpsTest,
     ForwardIsConcatDotsConcatBitForBitAndBackwardMatchesFiniteDifferences) {
  for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{
           {1, 1, 1}, {3, 4, 5}, {2, 26, 16}, {0, 3, 4}, {5, 2, 19}}) {
    const int64_t batch = shape[0], slots = shape[1], dim = shape[2];
    SCOPED_TRACE(::testing::Message() << "B=" << batch << " S=" << slots << " D=" << dim);
    const int64_t features = slots + 1, width = dim + features * (features - 1) / 2;
    RandomStream rng(batch * 10000 + slots * 100 + dim);
    const Tensor direct = RandomTensor({batch, dim}, rng);
    const Tensor pooled = RandomTensor({batch, slots * dim}, rng);
    const Tensor dout = RandomTensor({batch, width}, rng);
    Tensor out = Tensor::Empty({batch, width});
    ASSERT_TRUE(DlrmInteractionForward(direct, pooled, &out).ok());
    const Tensor expected = ComposedDlrmInteraction(direct, pooled);
    for (int64_t i = 0; i < out.numel(); ++i) {
      ASSERT_EQ(expected.data<float>()[i], out.data<float>()[i]) << "element " << i;
    }

    // f(direct, pooled) as doubles: direct, then the dots of [direct, pooled].
    auto reference = [&](const std::vector<double>& v) {
      const double* d = v.data();
      const double* p = v.data() + batch * dim;
      std::vector<double> all, result;
      for (int64_t b = 0; b < batch; ++b) {
        all.insert(all.end(), d + b * dim, d + (b + 1) * dim);
        all.insert(all.end(), p + b * slots * dim, p + (b + 1) * slots * dim);
      }
      const std::vector<double> dots = ReferenceInteraction(all, batch, features, dim);
      const int64_t pairs = features * (features - 1) / 2;
      for (int64_t b = 0; b < batch; ++b) {
        result.insert(result.end(), d + b * dim, d + (b + 1) * dim);
        result.insert(result.end(), dots.begin() + b * pairs, dots.begin() + (b + 1) * pairs);
      }
      return result;
    };
    std::vector<double> inputs = ToDouble(direct);
    const std::vector<double> p = ToDouble(pooled);
    inputs.insert(inputs.end(), p.begin(), p.end());
    const std::vector<double> g = ToDouble(dout);
    const std::vector<double> numeric = NumericGradient(
        [&](const std::vector<double>& v) { return WeightedSum(g, reference(v)); }, inputs);

    Tensor ddirect = Tensor::Empty({batch, dim}), dpooled = Tensor::Empty({batch, slots * dim});
    ASSERT_TRUE(DlrmInteractionBackward(direct, pooled, dout, &ddirect, &dpooled).ok());
    ExpectAllClose(std::vector<double>(numeric.begin(), numeric.begin() + batch * dim), ddirect,
                   1e-4, "ddirect");
    ExpectAllClose(std::vector<double>(numeric.begin() + batch * dim, numeric.end()), dpooled, 1e-4,
                   "dpooled");
  }
}

TEST(DlrmInteractionOpsTest, MismatchedShapesAreInvalidArguments) {
  const Tensor direct = Tensor::Zeros({2, 4}), pooled = Tensor::Zeros({2, 12});
  Tensor out = Tensor::Empty({2, 9});  // 4 + 6 pairs is 10
  Status status = DlrmInteractionForward(direct, pooled, &out);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("out must be f32[2, 10]"));

  status = DlrmInteractionForward(direct, Tensor::Zeros({2, 10}), &out);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("must be [B, S * D]"));

  Tensor ddirect = Tensor::Empty({2, 4}), wrong = Tensor::Empty({2, 8});
  status = DlrmInteractionBackward(direct, pooled, Tensor::Zeros({2, 10}), &ddirect, &wrong);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("dpooled"));

  status = DlrmInteractionBackward(direct, pooled, Tensor::Zeros({2, 9}), &ddirect, &wrong);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("dout"));
}

}  // namespace
}  // namespace ember::ops
