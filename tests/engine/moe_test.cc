// --model=moe (engine/models/moe.cc): its options are checked naming the
// flag, its parameters grow with the experts and its FLOPs per example do
// not, it trains on planted data beside DLRM, and on data whose examples
// follow one of several planted functions by a hidden cluster, beside the
// dense DLRM of about the same forward FLOPs per example.


#include <cmath>
#include <cstdio>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/model_zoo.h"
#include "engine/trainer.h"
#include "io/criteo.h"
#include "io/synthetic.h"
#include "ops/op_registry.h"
#include "tests/engine/planted_data.h"

namespace ember::engine {
namespace {

using Planted = test::PlantedData;

// `synthetic` split 80/20 (test::GeneratePlantedData).
Planted Generate(const io::SyntheticOptions& synthetic, const std::string& tag) {
  return test::GeneratePlantedData(synthetic, "moe_" + tag);
}

TrainOptions MoeOptions() {
  TrainOptions options;
  options.model.name = "moe";
  options.model.params.Set("bottom_mlp", std::vector<int>{64, 16});
  options.model.top_mlp = {64, 32};
  options.model.params.Set("num_experts", 4);
  options.batch_size = 256;
  options.threads = 2;
  options.show_progress = false;
  return options;
}

// Forward FLOPs per example of `model`'s graph at a batch of `batch`.
double ForwardFlopsPerExample(const ModelOptions& model, int64_t batch) {
  auto graph = BuildModelGraph(model, ops::DefaultOpRegistry());
  CHECK(graph.ok()) << graph.status();
  double flops = 0;
  for (size_t n = 0; n < (*graph)->nodes().size(); ++n) {
    flops += (*graph)->NodeCost(static_cast<int>(n), batch, /*backward=*/false).flops;
  }
  return flops / static_cast<double>(batch);
}

// Trains `options` one epoch on `data` and returns the test AUC.
double TrainedAuc(const TrainOptions& options, const Planted& data) {
  auto trainer = Trainer::Create(options, data.train.num_dense(), data.train.num_slots());
  CHECK(trainer.ok()) << trainer.status();
  auto report = (*trainer)->Fit(data.train);
  CHECK(report.ok()) << report.status();
  auto metrics = (*trainer)->Evaluate(data.test);
  CHECK(metrics.ok()) << metrics.status();
  return metrics->auc;
}

TEST(MoeModelTest, OptionsOutOfRangeAreRefusedNamingTheFlag) {
  struct Case {
    void (*set)(ModelOptions*);
    const char* flag;
  };
  const Case cases[] = {
      {[](ModelOptions* m) { m->params.Set("moe_top_k", 5); }, "--moe_top_k=5"},
      {[](ModelOptions* m) { m->params.Set("moe_top_k", 0); }, "--moe_top_k=0"},
      {[](ModelOptions* m) { m->params.Set("moe_capacity_factor", 0); }, "--moe_capacity_factor"},
      {[](ModelOptions* m) { m->params.Set("moe_capacity_factor", 1e9); }, "--moe_capacity_factor"},
      {[](ModelOptions* m) { m->params.Set("moe_aux_loss_weight", -1); }, "--moe_aux_loss_weight"},
      {[](ModelOptions* m) { m->params.Set("moe_expert_mlp", std::vector<int>{8, 0}); }, "--moe_expert_mlp"},
      {[](ModelOptions* m) { m->top_mlp = {}; }, "--moe_expert_mlp"},
      {[](ModelOptions* m) { m->params.Set("moe_gate_input", "dense"); }, "--moe_gate_input"},
      {[](ModelOptions* m) {
         m->params.Set("moe_gate_input", "bottom");
         m->num_dense = 0;
       },
       "--moe_gate_input=bottom"},
  };
  for (const Case& c : cases) {
    ModelOptions model = MoeOptions().model;
    c.set(&model);
    auto graph = BuildModelGraph(model, ops::DefaultOpRegistry());
    ASSERT_FALSE(graph.ok()) << c.flag;
    EXPECT_THAT(graph.status().message(), ::testing::HasSubstr(c.flag));
  }
}

// The report counts the routed choices and those dropped because their
// expert was full: none when every expert can take the whole batch, some at
// a tight capacity.
TEST(MoeModelTest, TheReportCountsDroppedExamples) {
  io::SyntheticOptions synthetic;
  synthetic.rows = 2500;
  const Planted data = Generate(synthetic, "report");
  for (double factor : {0.5, 64.0}) {
    TrainOptions options = MoeOptions();
    options.model.params.Set("moe_capacity_factor", factor);
    auto trainer = Trainer::Create(options, data.train.num_dense(), data.train.num_slots());
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    auto report = (*trainer)->Fit(data.train);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->examples * (*trainer)->options().model.params.Int("moe_top_k"),
              report->moe_choices);
    EXPECT_GT(report->moe_aux_loss_sum, 0.0);
    if (factor > 10) {
      EXPECT_EQ(0, report->moe_dropped_choices);
      EXPECT_EQ(0, report->moe_dropped_examples);
    } else {
      EXPECT_GT(report->moe_dropped_choices, 0);
      EXPECT_GT(report->moe_dropped_examples, 0);
      EXPECT_LE(report->moe_dropped_examples, report->examples);
    }
  }
}

TEST(MoeModelTest, ParametersGrowWithTheExpertsAndFlopsPerExampleDoNot) {
  ModelOptions four = MoeOptions().model, sixteen = four;
  sixteen.params.Set("num_experts", 16);
  auto small = BuildModelGraph(four, ops::DefaultOpRegistry());
  auto large = BuildModelGraph(sixteen, ops::DefaultOpRegistry());
  ASSERT_TRUE(small.ok() && large.ok());
  EXPECT_GT((*large)->parameter_count(), 3 * (*small)->parameter_count() / 2);
  // Only the gate (16 x its input) grows, beside k experts' worth of work.
  EXPECT_LT(ForwardFlopsPerExample(sixteen, 4096), 1.15 * ForwardFlopsPerExample(four, 4096));
}

TEST(MoeModelTest, TrainsOnPlantedDataToASensibleAuc) {
  io::SyntheticOptions synthetic;
  synthetic.rows = 100000;
  synthetic.seed = 5;
  const Planted data = Generate(synthetic, "plain");
  TrainOptions dlrm = MoeOptions();
  dlrm.model.name = "dlrm";
  const double dlrm_auc = TrainedAuc(dlrm, data);
  std::printf("dlrm on 80k planted rows: ceiling AUC %.4f, reached %.4f\n", data.bayes_auc,
              dlrm_auc);
  for (const int k : {1, 2}) {
    TrainOptions options = MoeOptions();
    options.model.params.Set("moe_top_k", k);
    const double auc = TrainedAuc(options, data);
    std::printf("moe top-%d on 80k planted rows: ceiling AUC %.4f, reached %.4f\n", k,
                data.bayes_auc, auc);
    // Top-1 sends each expert a quarter of the few rows (and drops what
    // exceeds an expert's capacity): it trails; top-2 keeps up with DLRM.
    EXPECT_GT(auc, k == 1 ? 0.70 : dlrm_auc - 0.02) << "top-" << k;
  }
}

// The data a mixture of experts is for (io/synthetic.h, num_clusters): 4
// hidden clusters, read from two bimodal dense features, each adding its own
// random ReLU teacher network (16 units, output std 3 logits) over the 15
// pair products of 6 interacting slots; no id weights, so that the clusters'
// functions are most of what is to learn. MoE with 8 experts of {16, 32},
// top-2, its gate reading the bottom MLP's output (--moe_gate_input=bottom:
// the dense features, where the cluster is), and the dense DLRM whose top
// MLP {w, 32} costs about the same forward FLOPs per example ({40, 32}),
// trained alike (480k rows, 2 epochs, learning rate 3e-3) on the same rows,
// both reported. About 30 s on 2 cores.
//
// Issue 33's goal: MoE within 0.02 AUC of the ceiling, and above the dense
// model of equal FLOPs. Measured on this data (seed 3; ceiling 0.9331,
// cluster-blind 0.7587), training seeds 1, 2, 3: MoE 0.9215, 0.9179, 0.9178;
// dense {40, 32} 0.9154, 0.9149, 0.9130 (MoE ahead by 0.003 .. 0.006; a 4x
// wider dense {160, 32} reached 0.9212, so capacity counts here). The gate
// reading the interaction instead: 0.9180, 0.9045 (seeds 1, 3), below dense
// on seed 3. The margin is small and not universal: on data seed 4
// (ceiling 0.9434) MoE 0.9305, 0.9285, 0.9257 beside dense 0.9273, 0.9282,
// 0.9275. At wide experts ({64, 32}, dense {160, 32}) the two tie: the
// dense model is wide enough for the clusters' teachers (its 4x wider
// sibling gains nothing), and routing adds variance.
TEST(MoeModelTest, OnClusteredDataBesideADenseMlpOfEqualFlops) {
  io::SyntheticOptions synthetic;
  synthetic.rows = 600000;
  synthetic.seed = 3;
  synthetic.num_clusters = 4;
  synthetic.cluster_units = 16;
  synthetic.cluster_scale = 3.0;
  synthetic.vocabulary = 20;
  synthetic.id_weight_scale = 0.0;
  synthetic.interacting_slots = 6;
  synthetic.interaction_scale = 0.4;
  const Planted data = Generate(synthetic, "clusters");

  TrainOptions moe = MoeOptions();
  moe.epochs = 2;
  moe.dense_optimizer.learning_rate = 3e-3f;
  moe.model.params.Set("num_experts", 8);
  moe.model.top_mlp = {16, 32};
  moe.model.params.Set("moe_gate_input", "bottom");
  const double moe_flops = ForwardFlopsPerExample(moe.model, moe.batch_size);
  // The dense top MLP {w, 32} whose FLOPs come closest to the MoE model's.
  TrainOptions dense = moe;
  dense.model.name = "dlrm";
  double dense_flops = 0;
  for (int w = 8; w <= 1024; w += 4) {
    ModelOptions candidate = dense.model;
    candidate.top_mlp = {w, 32};
    const double flops = ForwardFlopsPerExample(candidate, moe.batch_size);
    if (dense_flops == 0 || std::fabs(flops - moe_flops) < std::fabs(dense_flops - moe_flops)) {
      dense_flops = flops;
      dense.model.top_mlp = candidate.top_mlp;
    }
    if (flops > 2 * moe_flops) break;
  }
  const double moe_auc = TrainedAuc(moe, data);
  const double dense_auc = TrainedAuc(dense, data);
  std::printf(
      "4 planted clusters, 480k rows, 2 epochs: ceiling AUC %.4f, cluster-blind %.4f\n"
      "  moe (8 experts of {16,32}, top-2, gate on the bottom MLP): AUC %.4f, %.0f forward "
      "FLOPs/example\n"
      "  dlrm (top MLP {%d,32}):                                    AUC %.4f, %.0f forward "
      "FLOPs/example\n",
      data.bayes_auc, data.blind_auc, moe_auc, moe_flops, dense.model.top_mlp[0], dense_auc,
      dense_flops);
  EXPECT_NEAR(moe_flops, dense_flops, 0.05 * moe_flops);
  // The clusters are worth about 0.17 AUC.
  EXPECT_GT(data.bayes_auc, data.blind_auc + 0.1);
  EXPECT_GE(moe_auc, data.bayes_auc - 0.02);
  EXPECT_GT(moe_auc, dense_auc);
}

}  // namespace
}  // namespace ember::engine
