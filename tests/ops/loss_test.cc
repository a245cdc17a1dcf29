#include <cmath>
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

using testing::ExpectAllClose;
using ::testing::HasSubstr;
using testing::NumericGradient;
using testing::RandomTensor;
using testing::ToDouble;

// The textbook form -y log(sigmoid(z)) - (1 - y) log(1 - sigmoid(z)), in
// double; fine for the moderate logits it is used with.
double ReferenceLoss(const std::vector<double>& z, const std::vector<double>& y) {
  double total = 0.0;
  for (size_t i = 0; i < z.size(); ++i) {
    const double p = 1.0 / (1.0 + std::exp(-z[i]));
    total += -y[i] * std::log(p) - (1.0 - y[i]) * std::log(1.0 - p);
  }
  return total / static_cast<double>(z.size());
}

TEST(SigmoidCrossEntropyOpsTest, LossMatchesReferenceAndGradientMatchesFiniteDifferences) {
  for (int64_t batch : {1, 3, 17}) {
    SCOPED_TRACE(::testing::Message() << "B=" << batch);
    RandomStream rng(batch);
    const Tensor logits = RandomTensor({batch}, rng, -4.0, 4.0);
    const Tensor labels = RandomTensor({batch}, rng, 0.0, 1.0);  // soft labels are allowed
    Tensor dlogits = Tensor::Empty({batch});
    const Result<double> loss = SigmoidCrossEntropyWithLogits(logits, labels, &dlogits);
    ASSERT_TRUE(loss.ok()) << loss.status();
    const std::vector<double> z = ToDouble(logits), y = ToDouble(labels);
    EXPECT_NEAR(ReferenceLoss(z, y), *loss, 1e-12);
    ExpectAllClose(
        NumericGradient([&](const std::vector<double>& v) { return ReferenceLoss(v, y); }, z),
        dlogits, 1e-5, "dlogits");
  }
}

TEST(SigmoidCrossEntropyOpsTest, GradientIsSigmoidMinusLabelOverBatch) {
  const Tensor logits = Tensor::FromVector({0.0f, 2.0f}, {2, 1});  // [B, 1] is accepted
  const Tensor labels = Tensor::FromVector({1.0f, 0.0f}, {2, 1});
  Tensor dlogits = Tensor::Empty({2, 1});
  ASSERT_TRUE(SigmoidCrossEntropyWithLogits(logits, labels, &dlogits).ok());
  EXPECT_FLOAT_EQ((0.5f - 1.0f) / 2, dlogits.data<float>()[0]);
  EXPECT_FLOAT_EQ(static_cast<float>(1.0 / (1.0 + std::exp(-2.0)) / 2), dlogits.data<float>()[1]);
}

// Ranks of a data-parallel step each take their rows of the batch with the
// whole batch's size as mean_over: their dlogits are the whole batch's bits
// and their losses add up to its mean.
TEST(SigmoidCrossEntropyOpsTest, ShareOfALargerBatchGivesItsGradientBits) {
  RandomStream rng(5);
  const Tensor logits = RandomTensor({10}, rng, -3.0, 3.0);
  const Tensor labels = RandomTensor({10}, rng, 0.0, 1.0);
  Tensor whole = Tensor::Empty({10});
  const Result<double> whole_loss = SigmoidCrossEntropyWithLogits(logits, labels, &whole);
  ASSERT_TRUE(whole_loss.ok());
  double shares = 0.0;
  for (int64_t begin : {0, 6}) {
    const int64_t rows = begin == 0 ? 6 : 4;
    const Tensor z = Tensor::FromVector(
        std::vector<float>(logits.data<float>() + begin, logits.data<float>() + begin + rows),
        {rows});
    const Tensor y = Tensor::FromVector(
        std::vector<float>(labels.data<float>() + begin, labels.data<float>() + begin + rows),
        {rows});
    Tensor part = Tensor::Empty({rows});
    const Result<double> loss = SigmoidCrossEntropyWithLogits(z, y, &part, /*mean_over=*/10);
    ASSERT_TRUE(loss.ok()) << loss.status();
    shares += *loss;
    for (int64_t i = 0; i < rows; ++i) {
      EXPECT_EQ(whole.data<float>()[begin + i], part.data<float>()[i]) << "row " << begin + i;
    }
  }
  EXPECT_NEAR(*whole_loss, shares, 1e-12);
  Tensor dz = Tensor::Empty({10});
  EXPECT_THAT(SigmoidCrossEntropyWithLogits(logits, labels, &dz, -1).status().message(),
              HasSubstr("mean_over"));
}

TEST(SigmoidCrossEntropyOpsTest, LargeLogitsGiveFiniteExactLossAndGradient) {
  const Tensor logits = Tensor::FromVector({100, -100, 100, -100}, {4});
  const Tensor labels = Tensor::FromVector({1, 0, 0, 1}, {4});
  Tensor dlogits = Tensor::Empty({4});
  const Result<double> loss = SigmoidCrossEntropyWithLogits(logits, labels, &dlogits);
  ASSERT_TRUE(loss.ok()) << loss.status();
  // Two confident right answers cost ~e^-100 each, two confident wrong ones 100 each.
  EXPECT_NEAR(50.0, *loss, 1e-12);
  const float* g = dlogits.data<float>();
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(std::isfinite(g[i])) << i;
  EXPECT_NEAR(0.0, g[0], 1e-30);
  EXPECT_NEAR(0.0, g[1], 1e-30);
  EXPECT_FLOAT_EQ(0.25f, g[2]);
  EXPECT_FLOAT_EQ(-0.25f, g[3]);
}

TEST(SigmoidCrossEntropyOpsTest, LabelOutsideUnitIntervalIsInvalidArgumentNamingTheIndex) {
  const Tensor logits = Tensor::Zeros({3});
  const Result<double> loss =
      SigmoidCrossEntropyWithLogits(logits, Tensor::FromVector({0, 1, 1.5f}, {3}), nullptr);
  ASSERT_FALSE(loss.ok());
  EXPECT_EQ(StatusCode::kInvalidArgument, loss.status().code());
  EXPECT_THAT(loss.status().message(), HasSubstr("labels[2]"));

  const Result<double> nan_label =
      SigmoidCrossEntropyWithLogits(logits, Tensor::FromVector({0, NAN, 1}, {3}), nullptr);
  EXPECT_EQ(StatusCode::kInvalidArgument, nan_label.status().code());
  EXPECT_THAT(nan_label.status().message(), HasSubstr("labels[1]"));
}

TEST(SigmoidCrossEntropyOpsTest, MismatchedShapesAreInvalidArguments) {
  Tensor dlogits = Tensor::Empty({2});
  Result<double> loss =
      SigmoidCrossEntropyWithLogits(Tensor::Zeros({3}), Tensor::Zeros({2}), nullptr);
  EXPECT_EQ(StatusCode::kInvalidArgument, loss.status().code());
  EXPECT_THAT(loss.status().message(), HasSubstr("labels"));

  loss = SigmoidCrossEntropyWithLogits(Tensor::Zeros({3}), Tensor::Zeros({3}), &dlogits);
  EXPECT_EQ(StatusCode::kInvalidArgument, loss.status().code());
  EXPECT_THAT(loss.status().message(), HasSubstr("dlogits"));

  loss = SigmoidCrossEntropyWithLogits(Tensor::Zeros({3, 2}), Tensor::Zeros({3, 2}), nullptr);
  EXPECT_EQ(StatusCode::kInvalidArgument, loss.status().code());
  EXPECT_THAT(loss.status().message(), HasSubstr("logits"));

  loss = SigmoidCrossEntropyWithLogits(Tensor::Zeros({0}), Tensor::Zeros({0}), nullptr);
  EXPECT_EQ(StatusCode::kInvalidArgument, loss.status().code());
}

TEST(SigmoidOpsTest, SigmoidIsStableAndExactAtTheExtremes) {
  const Tensor x = Tensor::FromVector({-100, -1, 0, 1, 100}, {5});
  Tensor out = Tensor::Empty({5});
  ASSERT_TRUE(Sigmoid(x, &out).ok());
  const float* v = out.data<float>();
  EXPECT_NEAR(0.0f, v[0], 1e-40);
  EXPECT_FLOAT_EQ(static_cast<float>(1.0 / (1.0 + std::exp(1.0))), v[1]);
  EXPECT_FLOAT_EQ(0.5f, v[2]);
  EXPECT_FLOAT_EQ(static_cast<float>(1.0 / (1.0 + std::exp(-1.0))), v[3]);
  EXPECT_FLOAT_EQ(1.0f, v[4]);

  Tensor wrong = Tensor::Empty({4});
  EXPECT_EQ(StatusCode::kInvalidArgument, Sigmoid(x, &wrong).code());
}

}  // namespace
}  // namespace ember::ops
