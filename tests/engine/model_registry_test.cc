#include "engine/model_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"
#include "engine/model_zoo.h"
#include "engine/models/builtin.h"
#include "engine/models/layers.h"
#include "ops/graph_executor.h"
#include "ops/op_registry.h"

namespace ember::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A new model is this much: a spec (in its own file under engine/models/)
// and one registration. Logistic regression over [dense, embeddings].
ModelSpec LogisticRegressionSpec() {
  ModelSpec spec;
  spec.name = "logistic_regression";
  spec.description = "logistic regression over [dense, embeddings]";
  spec.build = [](const ModelOptions& o, ops::Graph* g) -> Status {
    EMBER_ASSIGN_OR_RETURN(const models::Inputs in, models::AddInputs(g, o));
    int64_t width = 0;
    EMBER_ASSIGN_OR_RETURN(const int x, models::DenseAndEmbeddings(g, in, &width));
    EMBER_ASSIGN_OR_RETURN(const int logit, models::AddMlp(g, "logit", x, width, {1}, false));
    return g->MarkOutput(logit);
  };
  return spec;
}

// The built-in models and logistic regression, in a registry of the test's
// own (the process-wide one stays as the other tests expect it).
class ModelRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(models::RegisterBuiltinModels(&models_).ok());
    ASSERT_TRUE(models_.Register(LogisticRegressionSpec()).ok());
  }
  ModelRegistry models_;
};

TEST_F(ModelRegistryTest, ANewModelIsOneSpecAndOneRegistration) {
  ModelOptions options;
  options.name = "logistic_regression";
  options.num_dense = 2;
  options.num_slots = 3;
  options.embedding_dim = 4;
  auto graph = BuildModelGraph(options, ops::DefaultOpRegistry(), models_);
  ASSERT_TRUE(graph.ok()) << graph.status();
  const std::vector<ops::GraphValue>& values = (*graph)->values();
  ASSERT_EQ(1u, (*graph)->outputs().size());
  EXPECT_EQ((std::vector<int64_t>{1}), values[(*graph)->outputs()[0]].shape);
  ASSERT_EQ(2u, (*graph)->parameters().size());
  EXPECT_EQ("logit.0.weight", values[(*graph)->parameters()[0]].name);
  EXPECT_EQ((std::vector<int64_t>{1, 14}), values[(*graph)->parameters()[0]].shape);
  EXPECT_EQ("logit.0.bias", values[(*graph)->parameters()[1]].name);

  // Its forward is w . [dense, pooled] + b.
  auto executor = ops::GraphExecutor::Create(graph->get(), /*seed=*/3);
  ASSERT_TRUE(executor.ok()) << executor.status();
  const int64_t batch = 5;
  RandomStream random(11);
  Tensor dense = Tensor::Empty({batch, 2}), pooled = Tensor::Empty({batch, 12});
  for (Tensor* t : {&dense, &pooled}) {
    for (int64_t i = 0; i < t->numel(); ++i)
      t->data<float>()[i] = static_cast<float>(random.Normal());
  }
  Tensor& bias = (*executor)->parameters()[1];
  bias.data<float>()[0] = 0.25f;
  ASSERT_TRUE((*executor)->Forward({dense, pooled}).ok());
  const Tensor& logits = (*executor)->output(0);
  const float* w = (*executor)->parameters()[0].data<float>();
  for (int64_t b = 0; b < batch; ++b) {
    double expected = 0.25;
    for (int64_t i = 0; i < 2; ++i) expected += double{w[i]} * dense.data<float>()[b * 2 + i];
    for (int64_t i = 0; i < 12; ++i)
      expected += double{w[2 + i]} * pooled.data<float>()[b * 12 + i];
    EXPECT_NEAR(expected, logits.data<float>()[b], 1e-5) << "example " << b;
  }
}

TEST_F(ModelRegistryTest, AnUnknownNameListsEveryRegisteredModel) {
  ModelOptions options;
  options.name = "resnet";
  auto graph = BuildModelGraph(options, ops::DefaultOpRegistry(), models_);
  EXPECT_EQ(StatusCode::kInvalidArgument, graph.status().code());
  EXPECT_EQ(
      "--model=resnet is not known; available: dlrm, deepfm, wide_deep, dcn_v2, mmoe, moe, "
      "logistic_regression",
      graph.status().message());
  // The process-wide registry holds the built-in models only.
  EXPECT_EQ(
      "--model=resnet is not known; available: dlrm, deepfm, wide_deep, dcn_v2, mmoe, moe",
      CheckModelName("resnet").message());
  EXPECT_TRUE(CheckModelName("mmoe").ok());
}

TEST_F(ModelRegistryTest, ASecondModelOfANameIsAlreadyExists) {
  const Status twice = models_.Register(LogisticRegressionSpec());
  EXPECT_EQ(StatusCode::kAlreadyExists, twice.code());
  EXPECT_EQ("model logistic_regression is already registered", twice.message());
  ModelSpec dlrm = LogisticRegressionSpec();
  dlrm.name = "dlrm";
  EXPECT_EQ(StatusCode::kAlreadyExists, models_.Register(dlrm).code());
  // The first registrations stand.
  auto spec = models_.Find("dlrm");
  ASSERT_TRUE(spec.ok());
  EXPECT_THAT((*spec)->description, HasSubstr("DLRM"));
  EXPECT_EQ(7u, models_.Names().size());
}

TEST(ModelRegistryRulesTest, ASpecWithoutANameBuildOrValidTasksIsInvalidArgument) {
  ModelRegistry models;
  ModelSpec unnamed = LogisticRegressionSpec();
  unnamed.name = "";
  EXPECT_EQ(StatusCode::kInvalidArgument, models.Register(unnamed).code());
  ModelSpec unbuilt = LogisticRegressionSpec();
  unbuilt.build = nullptr;
  EXPECT_EQ(StatusCode::kInvalidArgument, models.Register(unbuilt).code());
  ModelSpec two_tasks = LogisticRegressionSpec();
  two_tasks.default_tasks = 2;
  EXPECT_EQ(StatusCode::kInvalidArgument, models.Register(two_tasks).code());
  EXPECT_TRUE(models.Names().empty());
}

TEST(ModelRegistryRulesTest, ASingleTaskModelWithoutAMultiTaskOneSaysSo) {
  ModelRegistry models;
  ASSERT_TRUE(models.Register(LogisticRegressionSpec()).ok());
  ModelOptions options;
  options.name = "logistic_regression";
  options.num_tasks = 2;
  auto graph = BuildModelGraph(options, ops::DefaultOpRegistry(), models);
  EXPECT_EQ(StatusCode::kInvalidArgument, graph.status().code());
  EXPECT_THAT(graph.status().message(), HasSubstr("no model predicts several"));
}

TEST(BuiltinModelsTest, AreRegisteredInOrderWithTheirTaskCounts) {
  EXPECT_THAT(ModelNames(), ElementsAre("dlrm", "deepfm", "wide_deep", "dcn_v2", "mmoe", "moe"));
  for (const ModelSpec* spec : DefaultModelRegistry().Specs()) {
    SCOPED_TRACE(spec->name);
    EXPECT_FALSE(spec->description.empty());
    EXPECT_EQ(spec->name == "mmoe", spec->multi_task);
    EXPECT_EQ(spec->name == "mmoe" ? 2 : 1, DefaultTaskCount(spec->name));
  }
  EXPECT_EQ(1, DefaultTaskCount("resnet"));
}

// One invalid option: what it changes and, per model, the error it gives
// ("" where the model builds: an option it does not check).
struct InvalidCase {
  const char* what;
  std::function<void(ModelOptions&)> change;
  std::string error;             // Every model but mmoe (and moe).
  std::string mmoe_error = "=";  // "=": the same as the others.
  std::string moe_error = "=";   // "=": the same as the others.
};

std::vector<InvalidCase> InvalidCases() {
  const std::string use_mmoe = " predicts one; use --model=mmoe for multi-task data";
  return {
      {"negative dense", [](ModelOptions& o) { o.num_dense = -1; }, "dense feature count -1 < 0"},
      {"no slot", [](ModelOptions& o) { o.num_slots = 0; }, "the model needs at least one slot"},
      {"dim 0", [](ModelOptions& o) { o.embedding_dim = 0; },
       "--embedding_dim must be positive, got 0"},
      {"bottom width 0",
       [](ModelOptions& o) {
         o.bottom_mlp = {3, 0};
       },
       "--bottom_mlp widths must be positive, got 0"},
      {"top width 0", [](ModelOptions& o) { o.top_mlp = {0}; },
       "--top_mlp widths must be positive, got 0"},
      {"negative cross layers", [](ModelOptions& o) { o.cross_layers = -1; },
       "--cross_layers and --cross_rank must be >= 0"},
      {"negative cross rank", [](ModelOptions& o) { o.cross_rank = -1; },
       "--cross_layers and --cross_rank must be >= 0"},
      {"no task", [](ModelOptions& o) { o.num_tasks = 0; }, "the model needs at least one task"},
      {"two tasks", [](ModelOptions& o) { o.num_tasks = 2; },
       "the data has 2 labels per example, but --model=MODEL" + use_mmoe, ""},
      {"no expert", [](ModelOptions& o) { o.num_experts = 0; }, "",
       "--num_experts must be >= 1, got 0", "--num_experts must be >= 1, got 0"},
      {"no expert width", [](ModelOptions& o) { o.expert_mlp = {}; }, "",
       "--expert_mlp needs a width"},
      {"expert width 0",
       [](ModelOptions& o) {
         o.expert_mlp = {4, 0};
       },
       "", "--expert_mlp widths must be positive, got 0"},
      // The shared checks come first.
      {"dim 0 and no expert",
       [](ModelOptions& o) {
         o.embedding_dim = 0;
         o.num_experts = 0;
       },
       "--embedding_dim must be positive, got 0"},
      {"two tasks and no expert",
       [](ModelOptions& o) {
         o.num_tasks = 2;
         o.num_experts = 0;
       },
       "the data has 2 labels per example, but --model=MODEL" + use_mmoe,
       "--num_experts must be >= 1, got 0"},
  };
}

TEST(BuiltinModelsTest, ValidationErrorsAreThoseOfEachModel) {
  for (const InvalidCase& c : InvalidCases()) {
    for (const std::string& name : ModelNames()) {
      SCOPED_TRACE(std::string(c.what) + ", " + name);
      ModelOptions options;
      options.name = name;
      options.num_dense = 3;
      options.num_slots = 3;
      options.embedding_dim = 4;
      options.bottom_mlp = {5};
      options.top_mlp = {6};
      options.expert_mlp = {5};
      c.change(options);
      std::string error = name == "mmoe" && c.mmoe_error != "=" ? c.mmoe_error
                          : name == "moe" && c.moe_error != "="  ? c.moe_error
                                                                  : c.error;
      if (const size_t at = error.find("MODEL"); at != std::string::npos) {
        error.replace(at, 5, name);
      }
      auto graph = BuildModelGraph(options, ops::DefaultOpRegistry());
      if (error.empty()) {
        EXPECT_TRUE(graph.ok()) << graph.status();
        continue;
      }
      EXPECT_EQ(StatusCode::kInvalidArgument, graph.status().code());
      EXPECT_EQ(error, graph.status().message());
    }
  }
}

}  // namespace
}  // namespace ember::engine
