#include "ops/dense_optimizer.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/random.h"
#include "core/tensor.h"
#include "tests/ops/gradient_check.h"

namespace ember::ops {
namespace {

using testing::ExpectAllClose;
using ::testing::HasSubstr;
using testing::RandomTensor;
using testing::ToDouble;

// Kingma & Ba 2015, Algorithm 1, in double, with AdamW's decoupled decay.
struct ReferenceAdam {
  std::vector<double> m, v;
  void Step(const DenseOptimizerOptions& o, int64_t t, const std::vector<double>& g,
            std::vector<double>* w) {
    m.resize(g.size(), 0.0);
    v.resize(g.size(), 0.0);
    for (size_t i = 0; i < g.size(); ++i) {
      m[i] = o.beta1 * m[i] + (1.0 - o.beta1) * g[i];
      v[i] = o.beta2 * v[i] + (1.0 - o.beta2) * g[i] * g[i];
      const double m_hat = m[i] / (1.0 - std::pow(static_cast<double>(o.beta1), t));
      const double v_hat = v[i] / (1.0 - std::pow(static_cast<double>(o.beta2), t));
      (*w)[i] -= o.learning_rate * (m_hat / (std::sqrt(v_hat) + o.epsilon) +
                                    static_cast<double>(o.weight_decay) * (*w)[i]);
    }
  }
};

TEST(DenseOptimizerOpsTest, AdamMatchesDoubleReferenceForThreeSteps) {
  for (float weight_decay : {0.0f, 0.01f}) {
    SCOPED_TRACE(::testing::Message() << "weight_decay=" << weight_decay);
    DenseOptimizerOptions options;
    options.type = DenseOptimizer::kAdam;
    options.learning_rate = 0.01f;
    options.weight_decay = weight_decay;
    RandomStream rng(7);
    Tensor param = RandomTensor({5, 13}, rng);
    DenseOptimizerSlot slot = NewDenseOptimizerSlot(options, param);
    std::vector<double> w = ToDouble(param);
    ReferenceAdam reference;
    for (int64_t step = 1; step <= 3; ++step) {
      const Tensor grad = RandomTensor({5, 13}, rng);
      ASSERT_TRUE(DenseOptimizerStep(options, step, grad, &param, &slot).ok());
      reference.Step(options, step, ToDouble(grad), &w);
      ExpectAllClose(w, param, 1e-6, "param");
      ExpectAllClose(reference.m, slot.first_moment, 1e-6, "m");
      ExpectAllClose(reference.v, slot.second_moment, 1e-6, "v");
    }
  }
}

TEST(DenseOptimizerOpsTest, SgdSubtractsLearningRateTimesGradient) {
  DenseOptimizerOptions options;
  options.type = DenseOptimizer::kSgd;
  options.learning_rate = 0.5f;
  Tensor param = Tensor::FromVector({1, 2, 3}, {3});
  DenseOptimizerSlot slot = NewDenseOptimizerSlot(options, param);
  EXPECT_FALSE(slot.first_moment.defined());
  EXPECT_FALSE(slot.second_moment.defined());
  ASSERT_TRUE(
      DenseOptimizerStep(options, 1, Tensor::FromVector({2, -2, 0}, {3}), &param, &slot).ok());
  ExpectAllClose({0, 3, 3}, param, 0.0, "param");
}

TEST(DenseOptimizerOpsTest, AdagradMatchesDoubleReferenceForThreeSteps) {
  DenseOptimizerOptions options;
  options.type = DenseOptimizer::kAdagrad;
  options.learning_rate = 0.1f;
  RandomStream rng(8);
  Tensor param = RandomTensor({17}, rng);
  DenseOptimizerSlot slot = NewDenseOptimizerSlot(options, param);
  EXPECT_FALSE(slot.first_moment.defined());
  std::vector<double> w = ToDouble(param), acc(17, 0.0);
  for (int64_t step = 1; step <= 3; ++step) {
    const Tensor grad = RandomTensor({17}, rng);
    ASSERT_TRUE(DenseOptimizerStep(options, step, grad, &param, &slot).ok());
    const std::vector<double> g = ToDouble(grad);
    for (size_t i = 0; i < w.size(); ++i) {
      acc[i] += g[i] * g[i];
      w[i] -= options.learning_rate * g[i] / (std::sqrt(acc[i]) + options.epsilon);
    }
    ExpectAllClose(w, param, 1e-6, "param");
    ExpectAllClose(acc, slot.second_moment, 1e-6, "accumulator");
  }
}

TEST(DenseOptimizerOpsTest, ParsesKnownNamesAndRejectsOthers) {
  for (DenseOptimizer type :
       {DenseOptimizer::kSgd, DenseOptimizer::kAdagrad, DenseOptimizer::kAdam}) {
    const Result<DenseOptimizer> parsed = ParseDenseOptimizer(DenseOptimizerName(type));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(type, *parsed);
  }
  const Result<DenseOptimizer> unknown = ParseDenseOptimizer("rmsprop");
  EXPECT_EQ(StatusCode::kInvalidArgument, unknown.status().code());
  EXPECT_THAT(unknown.status().message(), HasSubstr("rmsprop"));
}

TEST(DenseOptimizerOpsTest, BadArgumentsAreInvalidArguments) {
  DenseOptimizerOptions options;
  Tensor param = Tensor::Zeros({2, 3});
  DenseOptimizerSlot slot = NewDenseOptimizerSlot(options, param);
  Status status = DenseOptimizerStep(options, 1, Tensor::Zeros({3, 2}), &param, &slot);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("grad must be f32[2, 3]"));

  status = DenseOptimizerStep(options, 0, Tensor::Zeros({2, 3}), &param, &slot);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("step"));

  DenseOptimizerSlot empty;
  status = DenseOptimizerStep(options, 1, Tensor::Zeros({2, 3}), &param, &empty);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("first_moment"));

  options.beta2 = 1.0f;
  status = DenseOptimizerStep(options, 1, Tensor::Zeros({2, 3}), &param, &slot);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("beta2"));
}

}  // namespace
}  // namespace ember::ops
