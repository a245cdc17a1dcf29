#include "scheduler/plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/file.h"
#include "core/json.h"
#include "scheduler/planner.h"
#include "tests/scheduler/scheduler_test_util.h"

namespace ember::scheduler {
namespace {

TEST(PlanLocalTrainingTest, ZeroThreadsMeansTheWholeHost) {
  auto plan = PlanLocalTraining(test::Host(8, 1 << 30), PlanRequest{});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(8, plan->threads);
  EXPECT_TRUE(plan->dense_device.is_cpu());
}

TEST(PlanLocalTrainingTest, MoreThreadsThanTheHostHasIsInvalidArgument) {
  PlanRequest request;
  request.threads = 9;
  auto plan = PlanLocalTraining(test::Host(8, 1 << 30), request);
  EXPECT_EQ(StatusCode::kInvalidArgument, plan.status().code());
  EXPECT_NE(std::string::npos, plan.status().message().find("--threads=9"));
}

TEST(PlanLocalTrainingTest, DenseGoesWhereTheRequestSaysIfTheHostHasIt) {
  PlanRequest request;
  request.dense_device = Device::Cuda(1);
  auto plan = PlanLocalTraining(test::Host(4, 1 << 30, 2, 1 << 30), request);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(Device::Cuda(1), plan->dense_device);
  request.dense_device = Device::Cpu();
  plan = PlanLocalTraining(test::Host(4, 1 << 30, 2, 1 << 30), request);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->dense_device.is_cpu());
  request.dense_device = Device::Cuda(2);
  plan = PlanLocalTraining(test::Host(4, 1 << 30, 2, 1 << 30), request);
  EXPECT_EQ(StatusCode::kFailedPrecondition, plan.status().code());
  EXPECT_NE(std::string::npos, plan.status().message().find("--dense_device=cuda:2"))
      << plan.status();
}

using ::testing::HasSubstr;

// A plan file that `ember plan --plan_out` wrote before plans serialized
// with nlohmann (tests/scheduler/testdata), read.
Plan ReadTestPlan(const std::string& name) {
  const std::string path = std::string(EMBER_SCHEDULER_TESTDATA) + "/" + name;
  Result<std::string> text = ReadFile(path);
  EXPECT_TRUE(text.ok()) << text.status();
  Result<Plan> plan = ParsePlanJson(text.ok() ? *text : "", path);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : Plan{};
}

TEST(PlanFileTest, APlanOfOneRankWrittenByTheOlderWriterLoadsWithItsValues) {
  const Plan plan = ReadTestPlan("plan_local.json");
  EXPECT_EQ("dlrm", plan.model);
  EXPECT_TRUE(plan.dense_device.is_cpu());
  EXPECT_EQ(1, plan.threads);
  EXPECT_EQ(128, plan.batch_size);
  EXPECT_TRUE(plan.pipeline);
  EXPECT_EQ(2, plan.pipeline_depth);
  EXPECT_EQ(0, plan.max_staleness);
  EXPECT_EQ(0, plan.embedding_memory_budget_bytes);
  EXPECT_TRUE(plan.prefetch);
  EXPECT_TRUE(plan.early_pulls);
  EXPECT_EQ(PerStage<int>::Filled(1), plan.stage_threads);
  EXPECT_EQ(std::vector<std::string>{"vm/cpu0"}, plan.replicas);
  EXPECT_EQ(1, plan.sparse_hosts);
  ASSERT_EQ(12u, plan.placement.size());
  EXPECT_EQ(std::make_pair(std::string("embedding.pull"), std::string("vm/cpu0")),
            plan.placement[2]);
  ASSERT_EQ(6u, plan.stages.size());
  EXPECT_EQ("pull.early", plan.stages[2].name);
  EXPECT_EQ("vm/cpu0", plan.stages[2].device);
  EXPECT_EQ("dense", plan.bottleneck);
  EXPECT_EQ(115340.0, std::round(plan.predicted_samples_per_sec));
  ASSERT_EQ(3u, plan.needs.size());
  EXPECT_EQ("batches in flight", plan.needs[1].what);
  EXPECT_TRUE(plan.links.empty());
  EXPECT_EQ(1, plan.ranks);
  EXPECT_EQ(0, plan.pipeline_parallel.ranks);
  EXPECT_THAT(plan.rationale, HasSubstr("coordinate descent over 58 configurations"));
}

TEST(PlanFileTest, APlanWithAMemoryTierKeepsItsPredictedTraffic) {
  const Plan plan = ReadTestPlan("plan_tier.json");
  EXPECT_EQ(1048576, plan.embedding_memory_budget_bytes);
  EXPECT_FALSE(plan.pipeline);
  EXPECT_DOUBLE_EQ(0.8669373027, plan.memory_tier_hit_rate);
  EXPECT_EQ(0.0, plan.disk_reads_per_step);
  ASSERT_EQ(4u, plan.needs.size());
  EXPECT_EQ(int64_t{76733833216}, plan.needs[3].capacity_bytes);
  ASSERT_EQ(1u, plan.links.size());
  EXPECT_EQ(2.0, plan.links[0].gbps_available);
}

TEST(PlanFileTest, APlanOfRanksKeepsItsExchange) {
  const Plan plan = ReadTestPlan("plan_ranks.json");
  EXPECT_EQ(8, plan.ranks);
  EXPECT_EQ(1, plan.ranks_per_host);
  EXPECT_DOUBLE_EQ(13844236.75, plan.exchange_bytes_per_step);
  EXPECT_DOUBLE_EQ(0.2555242562, plan.exchange_share);
  EXPECT_EQ(0.0, plan.expert_exchange_bytes_per_step);
}

TEST(PlanFileTest, APlanOfPipelineRanksOnGpusKeepsItsSchedule) {
  const Plan plan = ReadTestPlan("plan_pipeline.json");
  EXPECT_EQ(Device::Cuda(0), plan.dense_device);
  EXPECT_EQ(64u, plan.replicas.size());
  EXPECT_EQ(8, plan.sparse_hosts);
  EXPECT_EQ((PerStage<int>{1, 1, 12, 48, 12}), plan.stage_threads);
  const PipelineParallelPrediction& p = plan.pipeline_parallel;
  EXPECT_EQ(4, p.ranks);
  EXPECT_EQ(1, p.virtual_stages);
  EXPECT_EQ(64, p.micro_batches);
  EXPECT_EQ("interleaved", p.schedule);
  EXPECT_DOUBLE_EQ(0.2380527112, p.bubble_ratio);
  EXPECT_EQ((std::vector<int64_t>{6918912, 4605440, 1572864, 393472}), p.rank_activation_bytes);
}

TEST(PlanFileTest, APlanWrittenNowReadsBackToTheSameFile) {
  for (const char* name :
       {"plan_local.json", "plan_tier.json", "plan_ranks.json", "plan_pipeline.json"}) {
    const Plan plan = ReadTestPlan(name);
    Result<Plan> again = ParsePlanJson(plan.ToJson(), name);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(plan.ToJson(), again->ToJson()) << name;
  }
}

// The error of reading `name` with `edit` applied to its JSON.
std::string ErrorOfEdited(const std::string& name, void (*edit)(Json&)) {
  Result<Json> json = ParseJsonText(ReadTestPlan(name).ToJson());
  if (!json.ok()) return json.status().ToString();
  edit(*json);
  Result<Plan> plan = ParsePlanJson(json->dump(2), "p.json");
  return plan.ok() ? "ok" : plan.status().message();
}

TEST(PlanFileTest, AMissingOrUnknownFieldIsAnErrorNamingIt) {
  EXPECT_EQ("p.json: field \"batch_size\" is missing",
            ErrorOfEdited("plan_local.json", [](Json& j) { j.erase("batch_size"); }));
  EXPECT_EQ("p.json: field \"needs\" is missing",
            ErrorOfEdited("plan_local.json", [](Json& j) { j.erase("needs"); }));
  EXPECT_EQ("p.json: field \"stages.dense.cores\" is missing",
            ErrorOfEdited("plan_local.json", [](Json& j) { j["stages"]["dense"].erase("cores"); }));
  EXPECT_EQ("p.json: field \"early_pull\" is not a known field",
            ErrorOfEdited("plan_local.json", [](Json& j) { j["early_pull"] = false; }));
  EXPECT_EQ(
      "p.json: field \"pipeline_parallel.bubble\" is not a known field",
      ErrorOfEdited("plan_pipeline.json", [](Json& j) { j["pipeline_parallel"]["bubble"] = 0.5; }));
  EXPECT_EQ("p.json: field \"needs[1].bytes\" is not an integer",
            ErrorOfEdited("plan_local.json", [](Json& j) { j["needs"][1]["bytes"] = 1.5; }));
  EXPECT_EQ("p.json: field \"threads\" is 0; expected a number in [1, 65536]",
            ErrorOfEdited("plan_local.json", [](Json& j) { j["threads"] = 0; }));
  EXPECT_EQ("p.json: field \"dense_device\" is \"tpu\"; expected cpu, cuda or cuda:N",
            ErrorOfEdited("plan_local.json", [](Json& j) { j["dense_device"] = "tpu"; }));
}

TEST(PlanFileTest, FieldsOfOlderPlansMayBeMissing) {
  // Written before there were the choices: the trainer's split, early
  // pulls, the CPU; one rank.
  Result<Json> json = ParseJsonText(ReadTestPlan("plan_pipeline.json").ToJson());
  ASSERT_TRUE(json.ok()) << json.status();
  for (const char* key : {"model", "dense_device", "early_pulls", "stage_threads"}) {
    json->erase(key);
  }
  Result<Plan> plan = ParsePlanJson(json->dump(2), "p.json");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ("", plan->model);
  EXPECT_TRUE(plan->dense_device.is_cpu());
  EXPECT_TRUE(plan->early_pulls);
  EXPECT_EQ(TrainerStageThreads(48, true), plan->stage_threads);
}

TEST(PlanFileTest, MalformedJsonIsNamedByLineAndColumn) {
  Result<Plan> plan = ParsePlanJson("{\n  \"threads\": 1,,\n}", "p.json");
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("p.json:2:16: malformed JSON"));
}

}  // namespace
}  // namespace ember::scheduler
