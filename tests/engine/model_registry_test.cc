#include "engine/model_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
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

// A model with a hyper-parameter of its own: a hidden layer of
// `lr_hidden` widths before the logit, declared in its spec alone.
ModelSpec HiddenLogisticRegressionSpec() {
  ModelSpec spec = LogisticRegressionSpec();
  spec.name = "hidden_lr";
  spec.params = {{"lr_hidden", std::vector<int>{8}, "hidden widths before the logit.", Widths(0)}};
  spec.build = [](const ModelOptions& o, ops::Graph* g) -> Status {
    EMBER_ASSIGN_OR_RETURN(const models::Inputs in, models::AddInputs(g, o));
    int64_t width = 0;
    EMBER_ASSIGN_OR_RETURN(const int x, models::DenseAndEmbeddings(g, in, &width));
    EMBER_ASSIGN_OR_RETURN(
        const int logit,
        models::AddMlp(g, "mlp", x, width, models::WithOutput(o.params.WidthList("lr_hidden"), 1),
                       false));
    return g->MarkOutput(logit);
  };
  return spec;
}

TEST(ModelRegistryRulesTest, AModelsParametersTakeTheirDefaultsAndGivenValues) {
  ModelRegistry models;
  ASSERT_TRUE(models.Register(HiddenLogisticRegressionSpec()).ok());
  ModelOptions options;
  options.name = "hidden_lr";
  options.num_dense = 2;
  options.num_slots = 3;
  options.embedding_dim = 4;
  Result<ModelOptions> resolved = ResolveModelOptions(options, models);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(std::vector<int>{8}, resolved->params.WidthList("lr_hidden"));
  auto graph = BuildModelGraph(options, ops::DefaultOpRegistry(), models);
  ASSERT_TRUE(graph.ok()) << graph.status();
  const int64_t with_default = (*graph)->values().size();
  options.params.Set("lr_hidden", std::vector<int>{8, 4});
  graph = BuildModelGraph(options, ops::DefaultOpRegistry(), models);
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_GT(static_cast<int64_t>((*graph)->values().size()), with_default);
  options.params.Set("lr_hidden", 3);
  EXPECT_EQ("--lr_hidden takes a list of widths, got an integer",
            BuildModelGraph(options, ops::DefaultOpRegistry(), models).status().message());
}

TEST(ModelRegistryRulesTest, ParametersThatCannotHaveOneFlagEachAreRefused) {
  ModelRegistry models;
  ASSERT_TRUE(models::RegisterBuiltinModels(&models).ok());
  auto refused = [&](ModelSpec spec) {
    const Status status = models.Register(std::move(spec));
    EXPECT_EQ(StatusCode::kInvalidArgument, status.code()) << status;
    return status.message();
  };
  ModelSpec twice = HiddenLogisticRegressionSpec();
  twice.params.push_back(twice.params[0]);
  EXPECT_EQ("model hidden_lr declares lr_hidden twice", refused(twice));
  ModelSpec shared = HiddenLogisticRegressionSpec();
  shared.params[0].name = "top_mlp";
  EXPECT_EQ("model hidden_lr: parameter top_mlp is an option every model has", refused(shared));
  ModelSpec bad_default = HiddenLogisticRegressionSpec();
  bad_default.params[0].default_value = std::vector<int>{0};
  EXPECT_EQ("model hidden_lr: the default of --lr_hidden=0: widths must be positive, got 0",
            refused(bad_default));
  // dlrm's --bottom_mlp defaults to 512,256,64: another model's must too.
  ModelSpec other_default = HiddenLogisticRegressionSpec();
  other_default.params[0].name = "bottom_mlp";
  EXPECT_EQ(
      "model hidden_lr declares --bottom_mlp as a list of widths defaulting to 8 but model dlrm "
      "as a list of widths defaulting to 512,256,64: models share a parameter's flag",
      refused(other_default));
  ModelSpec other_kind = HiddenLogisticRegressionSpec();
  other_kind.params[0] = {"num_experts", 4.0, "experts", nullptr};
  EXPECT_THAT(refused(other_kind), HasSubstr("--num_experts as a number defaulting to 4 but"));
  ModelSpec unnamed = HiddenLogisticRegressionSpec();
  unnamed.params[0].name = "";
  EXPECT_EQ("model hidden_lr: a parameter needs a name", refused(unnamed));
  EXPECT_EQ(6u, models.Names().size());
  // Declared alike, a parameter is shared.
  ModelSpec alike = HiddenLogisticRegressionSpec();
  alike.params.push_back(models::BottomMlpParam());
  EXPECT_TRUE(models.Register(alike).ok());
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
  std::string error;  // Of every model but those of `errors` ("": it builds).
  std::map<std::string, std::string> errors = {};
};

std::vector<InvalidCase> InvalidCases() {
  const std::string use_mmoe = " predicts one; use --model=mmoe for multi-task data";
  return {
      {"negative dense", [](ModelOptions& o) { o.num_dense = -1; }, "dense feature count -1 < 0"},
      {"no slot", [](ModelOptions& o) { o.num_slots = 0; }, "the model needs at least one slot"},
      {"dim 0", [](ModelOptions& o) { o.embedding_dim = 0; },
       "--embedding_dim must be positive, got 0"},
      {"top width 0", [](ModelOptions& o) { o.top_mlp = {0}; },
       "--top_mlp widths must be positive, got 0"},
      {"no task", [](ModelOptions& o) { o.num_tasks = 0; }, "the model needs at least one task"},
      {"two tasks", [](ModelOptions& o) { o.num_tasks = 2; },
       "the data has 2 labels per example, but --model=MODEL" + use_mmoe,
       {{"mmoe", ""}}},
      // A parameter is checked by the models that declare it; the others
      // drop it.
      {"bottom width 0", [](ModelOptions& o) { o.params.Set("bottom_mlp", std::vector<int>{3, 0}); }, "",
       {{"dlrm", "--bottom_mlp=3,0: widths must be positive, got 0"},
        {"moe", "--bottom_mlp=3,0: widths must be positive, got 0"}}},
      {"negative cross layers", [](ModelOptions& o) { o.params.Set("cross_layers", -1); }, "",
       {{"dcn_v2", "--cross_layers=-1: must be >= 0"}}},
      {"negative cross rank", [](ModelOptions& o) { o.params.Set("cross_rank", -1); }, "",
       {{"dcn_v2", "--cross_rank=-1: must be >= 0"}}},
      {"no expert", [](ModelOptions& o) { o.params.Set("num_experts", 0); }, "",
       {{"mmoe", "--num_experts=0: must be >= 1"}, {"moe", "--num_experts=0: must be >= 1"}}},
      {"no expert width", [](ModelOptions& o) { o.params.Set("expert_mlp", std::vector<int>{}); },
       "", {{"mmoe", "--expert_mlp=: needs a width"}}},
      {"expert width 0", [](ModelOptions& o) { o.params.Set("expert_mlp", std::vector<int>{4, 0}); }, "",
       {{"mmoe", "--expert_mlp=4,0: widths must be positive, got 0"}}},
      {"widths for a number", [](ModelOptions& o) { o.params.Set("num_experts", std::vector<int>{4}); }, "",
       {{"mmoe", "--num_experts takes an integer, got a list of widths"},
        {"moe", "--num_experts takes an integer, got a list of widths"}}},
      {"a word that is not one", [](ModelOptions& o) { o.params.Set("moe_gate_input", "dense"); },
       "", {{"moe", "--moe_gate_input=dense: must be interaction or bottom"}}},
      {"top k above the experts",
       [](ModelOptions& o) {
         o.params.Set("num_experts", 2);
         o.params.Set("moe_top_k", 3);
       },
       "", {{"moe", "--moe_top_k=3 must be in [1, --num_experts=2]"}}},
      {"no model's parameter", [](ModelOptions& o) { o.params.Set("bottom_mpl", std::vector<int>{4}); },
       "--bottom_mpl is not an option of any model (--model=MODEL: it has no options of its own)",
       {{"dlrm", "--bottom_mpl is not an option of any model (--model=dlrm: its own options are "
                 "--bottom_mlp)"},
        {"dcn_v2", "--bottom_mpl is not an option of any model (--model=dcn_v2: its own options "
                   "are --cross_layers, --cross_rank)"},
        {"mmoe", "--bottom_mpl is not an option of any model (--model=mmoe: its own options are "
                 "--num_experts, --expert_mlp)"},
        {"moe", "--bottom_mpl is not an option of any model (--model=moe: its own options are "
                "--bottom_mlp, --num_experts, --moe_top_k, --moe_capacity_factor, "
                "--moe_expert_mlp, --moe_aux_loss_weight, --moe_gate_input)"}}},
      // The shared checks come first.
      {"dim 0 and no expert",
       [](ModelOptions& o) {
         o.embedding_dim = 0;
         o.params.Set("num_experts", 0);
       },
       "--embedding_dim must be positive, got 0"},
      {"two tasks and no expert",
       [](ModelOptions& o) {
         o.num_tasks = 2;
         o.params.Set("num_experts", 0);
       },
       "the data has 2 labels per example, but --model=MODEL" + use_mmoe,
       {{"mmoe", "--num_experts=0: must be >= 1"}}},
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
      options.params.Set("bottom_mlp", std::vector<int>{5});
      options.top_mlp = {6};
      options.params.Set("expert_mlp", std::vector<int>{5});
      c.change(options);
      const auto own = c.errors.find(name);
      std::string error = own != c.errors.end() ? own->second : c.error;
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
