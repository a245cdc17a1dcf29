#include "engine/dlrm.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "core/random.h"
#include "ops/dense_ops.h"

namespace ember::engine {
namespace {

void FillRandom(Tensor& t, RandomStream& random, double scale) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    t.data<float>()[i] = static_cast<float>(scale * random.Normal());
  }
}

// Mean sigmoid cross-entropy of the model's logits, accumulated in double.
double Loss(DlrmModel& model, const Tensor& dense, const Tensor& pooled, const Tensor& labels) {
  Tensor logits;
  CHECK(model.Forward(dense, pooled, &logits).ok());
  double loss = 0;
  for (int64_t i = 0; i < labels.numel(); ++i) {
    const double z = logits.data<float>()[i], y = labels.data<float>()[i];
    loss += std::max(z, 0.0) - z * y + std::log1p(std::exp(-std::fabs(z)));
  }
  return loss / labels.numel();
}

struct GradientCase {
  int batch;
  int num_dense;  // 0: no bottom MLP.
  int num_slots;
};

class DlrmGradientTest : public ::testing::TestWithParam<GradientCase> {};

// The whole dense half (bottom MLP, interaction, top MLP, loss) against
// central finite differences, for every parameter tensor and the pooled input.
TEST_P(DlrmGradientTest, BackwardMatchesFiniteDifferences) {
  const int batch = GetParam().batch;
  const int num_dense = GetParam().num_dense;
  const int num_slots = GetParam().num_slots;
  DlrmOptions options;
  options.num_dense = num_dense;
  options.num_slots = num_slots;
  options.embedding_dim = 4;
  options.bottom_mlp = {5, 4};
  options.top_mlp = {6};
  options.seed = 7;
  auto model = DlrmModel::Create(options);
  ASSERT_TRUE(model.ok()) << model.status();
  RandomStream random(batch * 100 + num_dense * 10 + num_slots);
  const int64_t pooled_width = 4 * num_slots;
  Tensor dense = Tensor::Empty({batch, num_dense});
  Tensor pooled = Tensor::Empty({batch, pooled_width});
  Tensor labels = Tensor::Empty({batch});
  FillRandom(dense, random, 1.0);
  FillRandom(pooled, random, 0.5);
  for (int i = 0; i < batch; ++i) labels.data<float>()[i] = static_cast<float>(i % 2);

  Tensor logits;
  ASSERT_TRUE((*model)->Forward(dense, pooled, &logits).ok());
  Tensor dlogits = Tensor::Empty({batch, 1});
  Tensor flat_dlogits = dlogits.Reshape({batch});
  ASSERT_TRUE(
      ops::SigmoidCrossEntropyWithLogits(logits.Reshape({batch}), labels, &flat_dlogits).ok());
  Tensor dpooled = Tensor::Empty({batch, pooled_width});
  ASSERT_TRUE((*model)->Backward(dlogits, &dpooled).ok());

  std::vector<std::pair<Tensor, Tensor>> checks;  // (value, analytic gradient)
  for (Parameter* p : (*model)->parameters()) checks.push_back({p->value, p->grad.Clone()});
  checks.push_back({pooled, dpooled.Clone()});
  // Central differences in double around float parameters. A perturbation
  // that moves a ReLU input across zero makes the loss non-differentiable
  // there; such points are recognised by one-sided slopes that disagree and
  // are skipped (they must stay rare).
  const double h = 1e-3;
  const double base = Loss(**model, dense, pooled, labels);
  int checked = 0, kinks = 0;
  for (auto& [value, grad] : checks) {
    for (int64_t i = 0; i < value.numel(); ++i) {
      float& x = value.data<float>()[i];
      const float saved = x;
      x = static_cast<float>(saved + h);
      const double plus = Loss(**model, dense, pooled, labels);
      x = static_cast<float>(saved - h);
      const double minus = Loss(**model, dense, pooled, labels);
      x = saved;
      const double right = (plus - base) / h, left = (base - minus) / h;
      if (std::fabs(right - left) > 1e-2 + 0.05 * std::fabs(right)) {
        ++kinks;
        continue;
      }
      const double numeric = (plus - minus) / (2 * h);
      const double analytic = grad.data<float>()[i];
      EXPECT_NEAR(numeric, analytic, 1e-3 + 1e-2 * std::fabs(numeric))
          << "element " << i << " of a " << value.DebugString();
      ++checked;
    }
  }
  EXPECT_LT(kinks, checked / 10) << "too many non-differentiable points to trust the check";
  EXPECT_GT(checked, 50);
}

INSTANTIATE_TEST_SUITE_P(Shapes, DlrmGradientTest,
                         ::testing::Values(GradientCase{1, 3, 3}, GradientCase{5, 3, 3},
                                           GradientCase{1, 0, 3}, GradientCase{5, 0, 3},
                                           GradientCase{4, 0, 1}),
                         [](const auto& info) {
                           return "batch" + std::to_string(info.param.batch) + "_dense" +
                                  std::to_string(info.param.num_dense) + "_slots" +
                                  std::to_string(info.param.num_slots);
                         });

TEST(DlrmTest, WithoutDenseFeaturesThereIsNoBottomMlp) {
  DlrmOptions options;
  options.num_dense = 0;
  options.num_slots = 3;
  options.embedding_dim = 4;
  options.bottom_mlp = {8};
  options.top_mlp = {5};
  auto model = DlrmModel::Create(options);
  ASSERT_TRUE(model.ok()) << model.status();
  // The top MLP only: [3 slots x 4 + 3 pairs] -> 5 -> 1, weights and biases.
  const std::vector<Parameter*> params = (*model)->parameters();
  ASSERT_EQ(4u, params.size());
  EXPECT_EQ((std::vector<int64_t>{5, 15}), params[0]->value.shape());
  // The dense input is not read: any [B, 0] tensor will do.
  Tensor pooled = Tensor::Zeros({2, 12}), logits;
  ASSERT_TRUE((*model)->Forward(Tensor::Empty({2, 0}), pooled, &logits).ok());
  EXPECT_EQ((std::vector<int64_t>{2, 1}), logits.shape());
}

TEST(DlrmTest, BottomMlpGetsAFinalLayerToTheEmbeddingDimensionWhenNeeded) {
  DlrmOptions options;
  options.num_dense = 13;
  options.embedding_dim = 16;
  options.bottom_mlp = {64, 32};
  auto implicit = DlrmModel::Create(options);
  options.bottom_mlp = {64, 32, 16};
  auto explicit_last = DlrmModel::Create(options);
  ASSERT_TRUE(implicit.ok() && explicit_last.ok());
  std::vector<Parameter*> a = (*implicit)->parameters(), b = (*explicit_last)->parameters();
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ((std::vector<int64_t>{16, 32}), a[4]->value.shape());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i]->value.shape(), b[i]->value.shape());
}

TEST(DlrmTest, NonPositiveWidthIsInvalidArgument) {
  DlrmOptions options;
  options.bottom_mlp = {64, 0};
  auto model = DlrmModel::Create(options);
  EXPECT_EQ(StatusCode::kInvalidArgument, model.status().code());
  EXPECT_NE(std::string::npos, model.status().message().find("--bottom_mlp"));
}

TEST(DlrmTest, PooledWidthMismatchIsInvalidArgument) {
  DlrmOptions options;
  options.num_dense = 2;
  options.num_slots = 2;
  options.embedding_dim = 4;
  options.bottom_mlp = {4};
  options.top_mlp = {4};
  auto model = DlrmModel::Create(options);
  ASSERT_TRUE(model.ok());
  Tensor dense = Tensor::Zeros({3, 2}), pooled = Tensor::Zeros({3, 7}), logits;
  EXPECT_EQ(StatusCode::kInvalidArgument, (*model)->Forward(dense, pooled, &logits).code());
}

}  // namespace
}  // namespace ember::engine
