#include "engine/dense_step_timing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ember::engine {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

DenseStepTimingOptions Small(const std::string& model) {
  DenseStepTimingOptions options;
  options.model.name = model;
  options.model.num_dense = 4;
  options.model.num_slots = 6;
  options.model.embedding_dim = 8;
  options.model.params.Set("bottom_mlp", std::vector<int>{16, 8});
  options.model.top_mlp = {16};
  options.model.params.Set("cross_layers", 1);
  options.model.params.Set("expert_mlp", std::vector<int>{16, 8});
  options.model.params.Set("num_experts", 2);
  options.model.num_tasks = model == "mmoe" ? 2 : 1;
  options.threads = 1;
  options.batch = 32;
  options.warmup_steps = 1;
  options.min_steps = 2;
  options.max_steps = 2;
  return options;
}

TEST(DenseStepTimingTest, EveryModelsDenseStepIsTimed) {
  for (const std::string model : {"dlrm", "deepfm", "wide_deep", "dcn_v2", "mmoe"}) {
    Result<double> seconds = TimeDenseStep(Small(model));
    ASSERT_TRUE(seconds.ok()) << model << ": " << seconds.status().ToString();
    EXPECT_GT(*seconds, 0.0) << model;
  }
}

TEST(DenseStepTimingTest, AnUnknownModelOrABadSizeIsRefused) {
  EXPECT_EQ(StatusCode::kInvalidArgument, TimeDenseStep(Small("nope")).status().code());
  DenseStepTimingOptions options = Small("dlrm");
  options.model.top_mlp = {0};
  EXPECT_EQ(StatusCode::kInvalidArgument, TimeDenseStep(options).status().code());
}

TEST(DenseStepTimingTest, TheDescriptorNamesWhatTheStepDependsOn) {
  const DenseStepTimingOptions dlrm = Small("dlrm");
  const std::string text = DenseStepDescriptor(dlrm.model, dlrm.optimizer);
  EXPECT_EQ("dlrm dense=4 slots=6 dim=8 tasks=1 bottom_mlp=16,8 top=16 optimizer=adam", text);

  ops::DenseOptimizerOptions sgd;
  sgd.type = ops::DenseOptimizer::kSgd;
  EXPECT_NE(text, DenseStepDescriptor(dlrm.model, sgd));
  ModelOptions wider = dlrm.model;
  wider.top_mlp = {32};
  EXPECT_NE(text, DenseStepDescriptor(wider, dlrm.optimizer));
  // Parameters of other models leave it unchanged.
  ModelOptions more_cross = dlrm.model;
  more_cross.params.Set("cross_layers", 5);
  EXPECT_EQ(text, DenseStepDescriptor(more_cross, dlrm.optimizer));

  const DenseStepTimingOptions dcn = Small("dcn_v2");
  EXPECT_THAT(DenseStepDescriptor(dcn.model, dcn.optimizer), HasSubstr(" cross_layers=1 cross_rank=0 "));
  EXPECT_THAT(DenseStepDescriptor(dcn.model, dcn.optimizer), Not(HasSubstr("bottom_mlp=")));
  const DenseStepTimingOptions mmoe = Small("mmoe");
  EXPECT_THAT(DenseStepDescriptor(mmoe.model, mmoe.optimizer),
              HasSubstr(" tasks=2 num_experts=2 expert_mlp=16,8 "));
}

}  // namespace
}  // namespace ember::engine
