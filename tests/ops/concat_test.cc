#include <cstdint>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/random.h"
#include "core/tensor.h"
#include "ops/dense_ops.h"
#include "tests/ops/gradient_check.h"
#include "tests/ops/test_tensors.h"

namespace ember::ops {
namespace {

using ::testing::ElementsAre;
using testing::ExpectAllClose;
using ::testing::HasSubstr;
using testing::NumericGradient;
using testing::RandomTensor;
using testing::ToDouble;
using testing::Values;
using testing::WeightedSum;

TEST(ConcatOpsTest, ConcatPlacesBlocksSideBySide) {
  const std::vector<Tensor> inputs = {Tensor::FromVector({1, 2}, {2, 1}),
                                      Tensor::FromVector({3, 4, 5, 6, 7, 8}, {2, 3})};
  Tensor out = Tensor::Empty({2, 4});
  ASSERT_TRUE(ConcatColumns(inputs, &out).ok());
  EXPECT_THAT(Values(out), ElementsAre(1, 3, 4, 5, 2, 6, 7, 8));
}

TEST(ConcatOpsTest, SplitMatchesFiniteDifferencesOfConcat) {
  // SplitColumns is ConcatColumns' backward: check it as one.
  for (int64_t batch : {1, 3, 17}) {
    SCOPED_TRACE(::testing::Message() << "B=" << batch);
    RandomStream rng(batch);
    const std::vector<int64_t> widths = {1, 5, 13};
    std::vector<Tensor> inputs, grads;
    for (int64_t w : widths) {
      inputs.push_back(RandomTensor({batch, w}, rng));
      grads.push_back(Tensor::Empty({batch, w}));
    }
    const Tensor din = RandomTensor({batch, 19}, rng);
    ASSERT_TRUE(SplitColumns(din, &grads).ok());
    const std::vector<double> g = ToDouble(din);
    for (size_t k = 0; k < inputs.size(); ++k) {
      auto objective = [&](const std::vector<double>& v) {
        std::vector<Tensor> perturbed = inputs;
        perturbed[k] = Tensor::Empty({batch, widths[k]});
        for (size_t i = 0; i < v.size(); ++i)
          perturbed[k].data<float>()[i] = static_cast<float>(v[i]);
        Tensor out = Tensor::Empty({batch, 19});
        EXPECT_TRUE(ConcatColumns(perturbed, &out).ok());
        return WeightedSum(g, ToDouble(out));
      };
      // Concatenation is linear, so float evaluation with a large step is exact enough.
      ExpectAllClose(NumericGradient(objective, ToDouble(inputs[k]), 0.25), grads[k], 1e-5,
                     "grads[" + std::to_string(k) + "]");
    }
  }
}

TEST(ConcatOpsTest, MismatchedShapesAreInvalidArguments) {
  const std::vector<Tensor> inputs = {Tensor::Zeros({2, 1}), Tensor::Zeros({3, 2})};
  Tensor out = Tensor::Empty({2, 3});
  Status status = ConcatColumns(inputs, &out);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("inputs[1]"));

  status = ConcatColumns({}, &out);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());

  std::vector<Tensor> outputs = {Tensor::Empty({2, 1}), Tensor::Empty({2, 1})};
  status = SplitColumns(Tensor::Zeros({2, 3}), &outputs);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("add up to 2"));
}

}  // namespace
}  // namespace ember::ops
