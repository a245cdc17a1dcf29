#include "engine/model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/random.h"
#include "engine/model_zoo.h"
#include "ops/dense_ops.h"
#include "ops/dense_optimizer.h"

namespace ember::engine {
namespace {

void FillRandom(Tensor& t, RandomStream& random, double scale) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    t.data<float>()[i] = static_cast<float>(scale * random.Normal());
  }
}

// Mean sigmoid cross-entropy of the model's logits, accumulated in double.
double Loss(DenseModel& model, const Tensor& dense, const Tensor& pooled, const Tensor& labels) {
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
  const char* model;
  int batch;
  int num_dense;  // 0: no bottom MLP.
  int num_slots;
  int cross_rank = 0;  // dcn_v2: 0 full rank.
  int num_tasks = 1;   // mmoe: labels per example.
};

class ModelGradientTest : public ::testing::TestWithParam<GradientCase> {};

// A whole model's dense half and the loss against central finite
// differences, for every parameter tensor and the pooled input.
TEST_P(ModelGradientTest, BackwardMatchesFiniteDifferences) {
  const int batch = GetParam().batch;
  const int num_dense = GetParam().num_dense;
  const int num_slots = GetParam().num_slots;
  ModelOptions options;
  options.name = GetParam().model;
  options.params.Set("cross_layers", 2);
  options.params.Set("cross_rank", GetParam().cross_rank);
  options.num_dense = num_dense;
  options.num_slots = num_slots;
  options.embedding_dim = 4;
  options.params.Set("bottom_mlp", std::vector<int>{5, 4});
  options.top_mlp = {6};
  options.num_tasks = GetParam().num_tasks;
  options.params.Set("num_experts", 3);
  options.params.Set("expert_mlp", std::vector<int>{5, 3});
  options.seed = 7;
  auto model = NewDenseModel(options);
  ASSERT_TRUE(model.ok()) << model.status();
  RandomStream random(batch * 100 + num_dense * 10 + num_slots);
  const int64_t pooled_width = 4 * num_slots;
  const int64_t outputs = int64_t{batch} * options.num_tasks;
  Tensor dense = Tensor::Empty({batch, num_dense});
  Tensor pooled = Tensor::Empty({batch, pooled_width});
  Tensor labels = Tensor::Empty({outputs});
  FillRandom(dense, random, 1.0);
  FillRandom(pooled, random, 0.5);
  for (int64_t i = 0; i < outputs; ++i) labels.data<float>()[i] = static_cast<float>(i % 3 == 0);

  Tensor logits;
  ASSERT_TRUE((*model)->Forward(dense, pooled, &logits).ok());
  ASSERT_EQ((std::vector<int64_t>{batch, options.num_tasks}), logits.shape());
  Tensor dlogits = Tensor::Empty({batch, options.num_tasks});
  Tensor flat_dlogits = dlogits.Reshape({outputs});
  ASSERT_TRUE(
      ops::SigmoidCrossEntropyWithLogits(logits.Reshape({outputs}), labels, &flat_dlogits).ok());
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

INSTANTIATE_TEST_SUITE_P(Shapes, ModelGradientTest,
                         ::testing::Values(GradientCase{"dlrm", 1, 3, 3},
                                           GradientCase{"dlrm", 5, 3, 3},
                                           GradientCase{"dlrm", 1, 0, 3},
                                           GradientCase{"dlrm", 5, 0, 3},
                                           GradientCase{"dlrm", 4, 0, 1},
                                           GradientCase{"wide_deep", 1, 3, 3},
                                           GradientCase{"wide_deep", 5, 2, 3},
                                           GradientCase{"wide_deep", 3, 0, 2},
                                           GradientCase{"deepfm", 1, 3, 3},
                                           GradientCase{"deepfm", 5, 2, 3},
                                           GradientCase{"deepfm", 3, 0, 2},
                                           GradientCase{"dcn_v2", 1, 3, 3},
                                           GradientCase{"dcn_v2", 5, 2, 3},
                                           GradientCase{"dcn_v2", 3, 0, 2, 2},
                                           GradientCase{"mmoe", 1, 3, 3, 0, 1},
                                           GradientCase{"mmoe", 5, 2, 3, 0, 2},
                                           GradientCase{"mmoe", 3, 0, 2, 0, 3}),
                         [](const auto& info) {
                           return std::string(info.param.model) +
                                  (info.param.num_tasks > 1
                                       ? "_tasks" + std::to_string(info.param.num_tasks)
                                       : "") +
                                  (info.param.cross_rank ? "_rank" + std::to_string(
                                                                         info.param.cross_rank)
                                                         : "") +
                                  "_batch" +
                                  std::to_string(info.param.batch) + "_dense" +
                                  std::to_string(info.param.num_dense) + "_slots" +
                                  std::to_string(info.param.num_slots);
                         });

TEST(ModelZooTest, MmoeHasAGatedMixturePerTaskAndOnlyItTakesSeveralTasks) {
  ModelOptions options;
  options.name = "mmoe";
  options.num_tasks = 3;
  auto model = NewDenseModel(options);
  ASSERT_TRUE(model.ok()) << model.status();
  const ops::Graph& graph = (*model)->graph();
  ASSERT_EQ(1u, graph.outputs().size());
  EXPECT_EQ((std::vector<int64_t>{3}), graph.values()[graph.outputs()[0]].shape);
  int mixtures = 0, softmaxes = 0;
  for (const ops::GraphNode& node : graph.nodes()) {
    mixtures += node.op == "mixture";
    softmaxes += node.op == "softmax";
  }
  EXPECT_EQ(3, mixtures);
  EXPECT_EQ(3, softmaxes);
  for (const char* name : {"dlrm", "deepfm", "wide_deep", "dcn_v2"}) {
    options.name = name;
    auto single = NewDenseModel(options);
    EXPECT_EQ(StatusCode::kInvalidArgument, single.status().code()) << name;
    EXPECT_NE(std::string::npos, single.status().message().find("--model=mmoe")) << name;
  }
  options.name = "mmoe";
  options.params.Set("num_experts", 0);
  EXPECT_EQ(StatusCode::kInvalidArgument, NewDenseModel(options).status().code());
}

TEST(ModelZooTest, EveryModelBuildsAGraphWithOneLogitAndCostsItsWork) {
  for (const std::string& name : ModelNames()) {
    SCOPED_TRACE(name);
    ModelOptions options;
    options.name = name;
    auto model = NewDenseModel(options);
    ASSERT_TRUE(model.ok()) << model.status();
    const ops::Graph& graph = (*model)->graph();
    ASSERT_EQ(1u, graph.outputs().size());
    EXPECT_EQ((std::vector<int64_t>{1}), graph.values()[graph.outputs()[0]].shape);
    // At least the MLP's multiply-adds: 13*512 + 512*256 + 256*64 for DLRM's
    // bottom, (2 + ...)*512 for the deep part of the others.
    EXPECT_GT((*model)->forward_flops_per_example(), 2 * 130000) << name;
    EXPECT_NE(std::string::npos, graph.ToDot().find("fully_connected"));
  }
  ModelOptions unknown;
  unknown.name = "resnet";
  auto model = NewDenseModel(unknown);
  EXPECT_EQ(StatusCode::kInvalidArgument, model.status().code());
  EXPECT_NE(std::string::npos, model.status().message().find("dlrm")) << model.status();
}

TEST(DlrmTest, WithoutDenseFeaturesThereIsNoBottomMlp) {
  ModelOptions options;
  options.num_dense = 0;
  options.num_slots = 3;
  options.embedding_dim = 4;
  options.params.Set("bottom_mlp", std::vector<int>{8});
  options.top_mlp = {5};
  auto model = NewDenseModel(options);
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
  ModelOptions options;
  options.num_dense = 13;
  options.embedding_dim = 16;
  options.params.Set("bottom_mlp", std::vector<int>{64, 32});
  auto implicit = NewDenseModel(options);
  options.params.Set("bottom_mlp", std::vector<int>{64, 32, 16});
  auto explicit_last = NewDenseModel(options);
  ASSERT_TRUE(implicit.ok() && explicit_last.ok());
  std::vector<Parameter*> a = (*implicit)->parameters(), b = (*explicit_last)->parameters();
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ((std::vector<int64_t>{16, 32}), a[4]->value.shape());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i]->value.shape(), b[i]->value.shape());
}

TEST(DlrmTest, NonPositiveWidthIsInvalidArgument) {
  ModelOptions options;
  options.params.Set("bottom_mlp", std::vector<int>{64, 0});
  auto model = NewDenseModel(options);
  EXPECT_EQ(StatusCode::kInvalidArgument, model.status().code());
  EXPECT_NE(std::string::npos, model.status().message().find("--bottom_mlp"));
}

TEST(DlrmTest, PooledWidthMismatchIsInvalidArgument) {
  ModelOptions options;
  options.num_dense = 2;
  options.num_slots = 2;
  options.embedding_dim = 4;
  options.params.Set("bottom_mlp", std::vector<int>{4});
  options.top_mlp = {4};
  auto model = NewDenseModel(options);
  ASSERT_TRUE(model.ok());
  Tensor dense = Tensor::Zeros({3, 2}), pooled = Tensor::Zeros({3, 7}), logits;
  EXPECT_EQ(StatusCode::kInvalidArgument, (*model)->Forward(dense, pooled, &logits).code());
}

// A small model of every kind with the shapes of the gradient checks.
ModelOptions SmallOptions(const std::string& name) {
  ModelOptions options;
  options.name = name;
  options.params.Set("cross_layers", 2);
  options.num_dense = 3;
  options.num_slots = 3;
  options.embedding_dim = 4;
  options.params.Set("bottom_mlp", std::vector<int>{5, 4});
  options.top_mlp = {6};
  options.num_tasks = name == "mmoe" ? 2 : 1;
  options.params.Set("num_experts", 3);
  options.params.Set("expert_mlp", std::vector<int>{5, 3});
  options.seed = 7;
  return options;
}

// A forward and backward of `model` on random inputs and labels from `seed`.
void TrainingPass(DenseModel& model, uint64_t seed, int64_t batch) {
  RandomStream random(seed);
  Tensor dense = Tensor::Empty({batch, model.num_dense()});
  Tensor pooled = Tensor::Empty({batch, model.pooled_width()});
  FillRandom(dense, random, 1.0);
  FillRandom(pooled, random, 0.5);
  const int64_t outputs = batch * model.num_tasks();
  Tensor labels = Tensor::Empty({outputs});
  for (int64_t i = 0; i < outputs; ++i) labels.data<float>()[i] = static_cast<float>(i % 2);
  Tensor logits;
  ASSERT_TRUE(model.Forward(dense, pooled, &logits).ok());
  Tensor dlogits = Tensor::Empty({batch, model.num_tasks()});
  Tensor flat_dlogits = dlogits.Reshape({outputs});
  ASSERT_TRUE(
      ops::SigmoidCrossEntropyWithLogits(logits.Reshape({outputs}), labels, &flat_dlogits).ok());
  Tensor dpooled = Tensor::Empty(pooled.shape());
  ASSERT_TRUE(model.Backward(dlogits, &dpooled).ok());
}

bool SameBits(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// Each parameter's value and optimizer state in `a` and `b` hold the same bits.
void ExpectSameState(const std::vector<Parameter*>& a, const std::vector<Parameter*>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(SameBits(a[i]->value, b[i]->value)) << "parameter " << i;
    EXPECT_TRUE(SameBits(a[i]->slot.first_moment, b[i]->slot.first_moment)) << "parameter " << i;
    EXPECT_TRUE(SameBits(a[i]->slot.second_moment, b[i]->slot.second_moment)) << "parameter " << i;
  }
}

TEST(DenseModelTest, OptimizerStepIsTheCpuOptimizerOverEveryParameter) {
  ops::DenseOptimizerOptions adam;
  adam.weight_decay = 0.01f;
  for (const std::string& name : ModelNames()) {
    SCOPED_TRACE(name);
    auto model = NewDenseModel(SmallOptions(name));
    auto reference = NewDenseModel(SmallOptions(name));
    ASSERT_TRUE(model.ok() && reference.ok());
    ASSERT_TRUE((*model)->InitOptimizer(adam).ok());
    // What the trainer does with the parameters of a model on the CPU.
    for (Parameter* p : (*reference)->parameters())
      p->slot = ops::NewDenseOptimizerSlot(adam, p->value);
    for (int64_t step = 1; step <= 2; ++step) {
      TrainingPass(**model, step, 5);
      TrainingPass(**reference, step, 5);
      ASSERT_TRUE((*model)->OptimizerStep(adam, step).ok());
      for (Parameter* p : (*reference)->parameters()) {
        ASSERT_TRUE(ops::DenseOptimizerStep(adam, step, p->grad, &p->value, &p->slot).ok());
      }
    }
    ExpectSameState((*model)->parameters(), (*reference)->parameters());
  }
}

TEST(DenseModelTest, ParametersCopyToTheHostAndBackWithTheirOptimizerState) {
  ops::DenseOptimizerOptions adagrad;
  adagrad.type = ops::DenseOptimizer::kAdagrad;
  auto trained = NewDenseModel(SmallOptions("dcn_v2"));
  ModelOptions other_seed = SmallOptions("dcn_v2");
  other_seed.seed = 8;
  auto restored = NewDenseModel(other_seed);
  ASSERT_TRUE(trained.ok() && restored.ok());
  ASSERT_TRUE((*trained)->InitOptimizer(adagrad).ok());
  ASSERT_TRUE((*restored)->InitOptimizer(adagrad).ok());
  TrainingPass(**trained, 1, 4);
  ASSERT_TRUE((*trained)->OptimizerStep(adagrad, 1).ok());

  Result<std::vector<Parameter>> host = (*trained)->ParametersToHost();
  ASSERT_TRUE(host.ok()) << host.status();
  std::vector<Parameter*> host_pointers;
  for (Parameter& p : *host) {
    EXPECT_FALSE(p.grad.defined());
    EXPECT_FALSE(p.slot.first_moment.defined());  // Adagrad has no first moment.
    host_pointers.push_back(&p);
  }
  ExpectSameState((*trained)->parameters(), host_pointers);
  ASSERT_TRUE((*restored)->ParametersFromHost(*host).ok());
  ExpectSameState((*trained)->parameters(), (*restored)->parameters());

  // A mismatch is refused before anything changes.
  std::vector<Parameter> short_list(host->begin(), host->end() - 1);
  EXPECT_EQ(StatusCode::kInvalidArgument, (*restored)->ParametersFromHost(short_list).code());
  std::vector<Parameter> wrong_size = *host;
  wrong_size.front().value = Tensor::Zeros({1});
  wrong_size.back().value = Tensor::Zeros(wrong_size.back().value.shape());
  const Status status = (*restored)->ParametersFromHost(wrong_size);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code()) << status;
  EXPECT_THAT(status.message(), ::testing::HasSubstr("parameter 0"));
  ExpectSameState((*trained)->parameters(), (*restored)->parameters());
}

TEST(DenseModelTest, ACudaDeviceIsRefusedSayingWhyWhenThereIsNone) {
  if (CudaDeviceAvailable()) GTEST_SKIP() << "checks the refusal where no CUDA device is present";
  ModelOptions options = SmallOptions("dlrm");
  options.device = Device::Cuda(0);
  auto model = NewDenseModel(options);
  EXPECT_EQ(StatusCode::kFailedPrecondition, model.status().code()) << model.status();
  EXPECT_THAT(model.status().message(),
              ::testing::HasSubstr(CudaCompiledIn() ? "0 CUDA device(s) are present"
                                                    : "built without CUDA"));
}

}  // namespace
}  // namespace ember::engine
