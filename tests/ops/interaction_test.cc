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

TEST(DotInteractionOpsTest, ForwardMatchesDoubleReferenceAndBackwardMatchesFiniteDifferences) {
  for (int64_t batch : {1, 3, 17}) {
    for (int64_t num_features : {1, 2, 5, 9}) {
      for (int64_t dim : {1, 4, 13}) {
        SCOPED_TRACE(::testing::Message()
                     << "B=" << batch << " F=" << num_features << " D=" << dim);
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
                             return WeightedSum(g,
                                                ReferenceInteraction(v, batch, num_features, dim));
                           },
                           f),
                       dfeatures, 1e-4, "dfeatures");
      }
    }
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

}  // namespace
}  // namespace ember::ops
