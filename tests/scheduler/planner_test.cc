#include "scheduler/planner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/json.h"
#include "scheduler/cluster_file.h"
#include "tests/scheduler/scheduler_test_util.h"

namespace ember::scheduler {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

TEST(TrainerStageThreadsTest, MatchesTheTrainersSplit) {
  EXPECT_EQ((PerStage<int>{1, 1, 2, 8, 2}), TrainerStageThreads(8, true));
  EXPECT_EQ((PerStage<int>{1, 1, 1, 2, 1}), TrainerStageThreads(2, true));
  EXPECT_EQ((PerStage<int>{3, 3, 3, 3, 3}), TrainerStageThreads(3, false));
}

TEST(PredictPlanTest, SamplesPerSecondIsTheBatchOverTheSimulatedStepTime) {
  const Program program = test::MlpProgram(256);
  const ResourceGraph graph = test::Host(4, 64 * kGiB);
  const CostModel cost(&graph);
  PlanKnobs knobs;
  knobs.threads = 4;
  Result<Plan> plan = PredictPlan(program, cost, knobs, PlacerOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_DOUBLE_EQ(256 / plan->predicted_step_seconds, plan->predicted_samples_per_sec);
  // The bottleneck is the stage with the most time per batch.
  double worst = 0;
  for (const StagePrediction& s : plan->stages) worst = std::max(worst, s.seconds);
  for (const StagePrediction& s : plan->stages) {
    if (s.name == plan->bottleneck) {
      EXPECT_EQ(worst, s.seconds);
    }
  }
  ASSERT_FALSE(plan->needs.empty());
  EXPECT_EQ("h/cpu0", plan->needs[0].device);
  // Sequential: one step is every stage in turn, no faster than pipelined.
  knobs.pipeline = false;
  Result<Plan> sequential = PredictPlan(program, cost, knobs, PlacerOptions{});
  ASSERT_TRUE(sequential.ok());
  double sum = 0;
  for (const StagePrediction& s : sequential->stages) sum += s.seconds;
  EXPECT_NEAR(sum, sequential->predicted_step_seconds, 1e-9);
}

// The planner's choice against every combination of the same knobs.
void ExpectNearTheGridBest(const Program& program, const ResourceGraph& graph,
                           const PlannerOptions& options) {
  const CostModel cost(&graph);
  PlanKnobs start;
  start.threads = 1;
  start.depth = 1;
  start.batch = options.batch_sizes.front();
  Result<Plan> chosen = MakePlan(program, cost, options, start);
  ASSERT_TRUE(chosen.ok()) << chosen.status().ToString();
  double best = 0;
  std::string best_knobs;
  for (int t : options.threads) {
    for (int64_t b : options.batch_sizes) {
      for (int d : options.depths) {
        for (int s = 0; s <= options.max_staleness; ++s) {
          for (bool pipeline : {true, false}) {
            // Early pulls are a knob the planner chooses too.
            for (bool early_pulls : {true, false}) {
              PlanKnobs k;
              k.threads = t;
              k.batch = b;
              k.pipeline = pipeline;
              k.depth = d;
              k.staleness = s;
              k.early_pulls = early_pulls;
              Result<Plan> p = PredictPlan(program, cost, k, options.placer);
              ASSERT_TRUE(p.ok());
              if (p->predicted_samples_per_sec > best) {
                best = p->predicted_samples_per_sec;
                best_knobs = p->ToJson();
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GE(chosen->predicted_samples_per_sec, 0.97 * best) << "chosen:\n"
                                                            << chosen->ToText() << "grid best:\n"
                                                            << best_knobs;
}

TEST(MakePlanTest, CoordinateDescentComesNearTheGridBest) {
  PlannerOptions options;
  options.threads = {1, 2, 4, 8, 16};
  options.batch_sizes = {128, 512, 2048};
  options.max_staleness = 2;
  ExpectNearTheGridBest(test::MlpProgram(512), test::Host(16, 64 * kGiB), options);
  ExpectNearTheGridBest(test::MlpProgram(32, 1000000, 1000000), test::Host(4, 64 * kGiB), options);
}

// All on the CPU, the dense stage's team spans every core: whatever runs
// beside it costs it that CPU time, so overlap cannot pay, while sequential
// stages use every thread.
TEST(MakePlanTest, MoreCoresGetMoreThreadsAndNoPipelineWhenAllIsOnTheCpu) {
  const Program program = test::MlpProgram(1024);
  PlannerOptions options;
  options.threads = {1, 2, 4, 8};
  for (int cores : {2, 8}) {
    const ResourceGraph graph = test::Host(cores, 64 * kGiB);
    const CostModel cost(&graph);
    Result<Plan> plan = MakePlan(program, cost, options, PlanKnobs{});
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(cores, plan->threads);
    EXPECT_FALSE(plan->pipeline) << cores << " cores";
  }
}

// The dense stage on a GPU leaves the cores to the sparse stages: overlap
// hides them.
TEST(MakePlanTest, ADenseStageOnAGpuIsPipelined) {
  const Program program = test::MlpProgram(1024);
  const ResourceGraph graph = test::Host(8, 64 * kGiB, /*gpus=*/1, 16 * kGiB);
  const CostModel cost(&graph);
  Result<Plan> plan = MakePlan(program, cost, PlannerOptions{}, PlanKnobs{});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_TRUE(plan->dense_device.is_cuda());
  EXPECT_TRUE(plan->pipeline);
  EXPECT_EQ(0, plan->max_staleness);  // The user allowed none.
}

// With the dense stage on a GPU the sparse stages on the CPU are the
// bottleneck: a free split gives them more than the trainer's default
// quarter of the threads each, and predicts more samples/s for it. Every
// stage stays within the budget.
TEST(MakePlanTest, AFreeSplitGivesTheSparseStagesTheCoresADenseGpuStageLeaves) {
  const Program program = test::MlpProgram(1024, 1000000, 10000000);
  const ResourceGraph graph = test::Host(8, 64 * kGiB, /*gpus=*/1, 16 * kGiB);
  const CostModel cost(&graph);
  PlannerOptions options;
  options.threads = {8};
  options.allow_sequential = false;
  PlanKnobs start;
  start.threads = 8;
  Result<Plan> fixed = MakePlan(program, cost, options, start);
  ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
  EXPECT_EQ(TrainerStageThreads(8, true), fixed->stage_threads);
  options.free_split = true;
  Result<Plan> free = MakePlan(program, cost, options, start);
  ASSERT_TRUE(free.ok()) << free.status().ToString();
  ASSERT_TRUE(free->dense_device.is_cuda());
  EXPECT_GT(free->predicted_samples_per_sec, 1.05 * fixed->predicted_samples_per_sec)
      << free->ToText() << fixed->ToText();
  const int pull = free->stage_threads[Stage::kPull];
  const int push = free->stage_threads[Stage::kPush];
  EXPECT_GT(std::max(pull, push), 2) << free->ToText();
  for (int t : free->stage_threads) {
    EXPECT_GE(t, 1);
    EXPECT_LE(t, free->threads);
  }
}

// Early pulls overlap a pull with the dense step of the batch before. With
// the dense stage on a GPU that hides the pull; on a CPU whose cores the
// dense stage's team fills, the overlap only slows the team, and the planner
// turns them off (as measured on 2 cores: pipeline_bench).
TEST(MakePlanTest, EarlyPullsAreChosenWhereTheOverlapPays) {
  const Program program = test::MlpProgram(1024, 1000000, 10000000);
  PlannerOptions options;
  options.allow_sequential = false;
  options.depths = {4};
  const ResourceGraph gpu_host = test::Host(8, 64 * kGiB, /*gpus=*/1, 16 * kGiB);
  const CostModel gpu_cost(&gpu_host);
  options.threads = {8};
  Result<Plan> gpu = MakePlan(program, gpu_cost, options, PlanKnobs{});
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  ASSERT_TRUE(gpu->dense_device.is_cuda());
  EXPECT_TRUE(gpu->early_pulls) << gpu->ToText();
  const ResourceGraph cpu_host = test::Host(2, 64 * kGiB);
  const CostModel cpu_cost(&cpu_host);
  options.threads = {2};
  Result<Plan> cpu = MakePlan(program, cpu_cost, options, PlanKnobs{});
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  EXPECT_FALSE(cpu->early_pulls) << cpu->ToText();
  // Not a choice the planner may make: kept as given.
  options.choose_early_pulls = false;
  PlanKnobs start;
  start.threads = 2;
  Result<Plan> kept = MakePlan(program, cpu_cost, options, start);
  ASSERT_TRUE(kept.ok());
  EXPECT_TRUE(kept->early_pulls);
}

// A split given in the start knobs without free_split is kept, and the
// thread budget is not searched below its largest stage.
TEST(MakePlanTest, AGivenSplitIsKept) {
  const Program program = test::MlpProgram(1024);
  const ResourceGraph graph = test::Host(8, 64 * kGiB);
  const CostModel cost(&graph);
  PlannerOptions options;
  options.threads = {1, 2, 4, 8};
  options.allow_sequential = false;
  PlanKnobs start;
  start.threads = 8;
  start.split = {1, 1, 3, 4, 2};
  Result<Plan> plan = MakePlan(program, cost, options, start);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(start.split, plan->stage_threads);
  EXPECT_GE(plan->threads, 4);
}

// A split is the pipeline's: a sequential step runs every stage on every
// thread whatever the knobs say.
TEST(PredictPlanTest, ASequentialPlanIgnoresTheSplit) {
  const Program program = test::MlpProgram(64);
  const ResourceGraph graph = test::Host(4, 64 * kGiB);
  const CostModel cost(&graph);
  PlanKnobs knobs;
  knobs.threads = 4;
  knobs.pipeline = false;
  knobs.split = {1, 1, 1, 2, 1};
  Result<Plan> plan = PredictPlan(program, cost, knobs, PlacerOptions{});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(TrainerStageThreads(4, false), plan->stage_threads);
  knobs.pipeline = true;
  plan = PredictPlan(program, cost, knobs, PlacerOptions{});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(knobs.split, plan->stage_threads);
}

// A slow disk tier (5000 random reads/s: 200 us a miss, waiting on the
// device, not on a core) on 16 cores: prefetching in a pipeline hides the
// reads behind a large dense stage; sequential training waits for them.
TEST(MakePlanTest, ASlowDiskTierOnManyCoresIsPipelined) {
  const Program program = test::MlpProgram(16384, 1000000, 10000000);
  ResourceGraph graph = test::Host(16, 64 * kGiB);
  const int disk = graph.DevicesOf(DeviceKind::kDisk)[0];
  graph.devices[disk].rates.tier_pull_us_per_miss = 20.0;
  graph.devices[disk].rates.random_reads_per_sec = 5000;
  PlannerOptions options;
  options.threads = {16};
  options.placer.memory_limit_bytes = int64_t{3000} << 20;
  const CostModel cost(&graph);
  Result<Plan> plan = MakePlan(program, cost, options, PlanKnobs{});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_GT(plan->embedding_memory_budget_bytes, 0);
  EXPECT_TRUE(plan->pipeline) << plan->ToText();
  EXPECT_TRUE(plan->prefetch);
  // A disk that answers from its cache (1M reads/s): a miss is 20 us of CPU
  // work, which a pipeline cannot hide on cores the dense stage fills.
  graph.devices[disk].rates.random_reads_per_sec = 1e6;
  Result<Plan> fast = MakePlan(program, cost, options, PlanKnobs{});
  ASSERT_TRUE(fast.ok());
  EXPECT_FALSE(fast->pipeline) << fast->ToText();
}

TEST(MakePlanTest, ATightMemoryLimitGivesADiskTierWithABudget) {
  const Program program = test::MlpProgram(64, 1000000, 10000000);
  PlannerOptions options;
  options.threads = {4};
  options.placer.memory_limit_bytes = 32 << 20;
  const ResourceGraph graph = test::Host(4, 64 * kGiB);
  const CostModel cost(&graph);
  Result<Plan> plan = MakePlan(program, cost, options, PlanKnobs{});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(32 << 20, plan->embedding_memory_budget_bytes);
  bool disk_need = false;
  for (const DeviceNeed& n : plan->needs) disk_need = disk_need || n.device == "h/disk0";
  EXPECT_TRUE(disk_need);
  // The memory tier's predicted traffic, as the cost model gives it for the
  // plan's batch, in the text and the JSON.
  StepSetup setup;
  setup.batch = plan->batch_size;
  setup.memory_budget_bytes = plan->embedding_memory_budget_bytes;
  const TierTraffic traffic = program.MemoryTierTraffic(
      setup.memory_budget_bytes / cost.RowBytes(program, 0), setup.batch);
  EXPECT_GT(traffic.reads, 0.0);
  EXPECT_DOUBLE_EQ(traffic.reads, plan->disk_reads_per_step);
  EXPECT_DOUBLE_EQ(traffic.writes, plan->disk_writes_per_step);
  EXPECT_DOUBLE_EQ(traffic.hits / traffic.distinct, plan->memory_tier_hit_rate);
  EXPECT_THAT(plan->ToText(), ::testing::HasSubstr(" rows read from disk and "));
  EXPECT_THAT(plan->ToJson(), ::testing::HasSubstr("\"disk_writes_per_step\""));
}

constexpr char kCluster[] = R"({
  "hosts": [{"name": "n", "count": 4, "sockets": [{"cores": 64, "memory_gb": 512}],
             "gpus": [{"count": 4, "memory_gb": 80, "rates": {"gemm_gflops": 100000,
                       "memory_gbps": 2000}, "pcie_gbps": 25}],
             "nvlink_gbps": 300, "disks": [{"free_gb": 1000}]}],
  "network": {"gbps": NET}})";

Result<Plan> ClusterPlan(double network_gbps) {
  std::string text = kCluster;
  text.replace(text.find("NET"), 3, std::to_string(network_gbps));
  static ResourceGraph graph;
  EMBER_ASSIGN_OR_RETURN(graph, ParseClusterFile(text, "c.json"));
  const Program program = test::MlpProgram(1024, 10000000, 100000000);
  const CostModel cost(&graph);
  PlannerOptions options;
  options.threads = {64};
  options.batch_sizes = {512, 2048, 8192};
  PlanKnobs start;
  start.threads = 64;
  return MakePlan(program, cost, options, start);
}

TEST(MakePlanTest, AClusterPlanUsesEveryGpuAndSlowsWithTheNetwork) {
  Result<Plan> fast = ClusterPlan(25.0);
  ASSERT_TRUE(fast.ok()) << fast.status().ToString();
  EXPECT_EQ(16u, fast->replicas.size());
  EXPECT_EQ(4, fast->sparse_hosts);
  EXPECT_TRUE(fast->dense_device.is_cuda());
  Result<Plan> slow = ClusterPlan(2.5);
  ASSERT_TRUE(slow.ok());
  EXPECT_LT(slow->predicted_samples_per_sec, fast->predicted_samples_per_sec);
  EXPECT_GE(slow->batch_size, fast->batch_size);  // Larger batches amortise the network.
}

TEST(PlanJsonTest, APlanRoundTripsThroughItsJson) {
  const Program program = test::MlpProgram(64);
  const ResourceGraph graph = test::Host(4, 64 * kGiB);
  const CostModel cost(&graph);
  PlanKnobs knobs{3, 512, true, 2, 1, false, false, {}};
  Result<Plan> plan = PredictPlan(program, cost, knobs, PlacerOptions{});
  ASSERT_TRUE(plan.ok());
  Result<Plan> back = ParsePlanJson(plan->ToJson(), "p.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(3, back->threads);
  EXPECT_EQ(512, back->batch_size);
  EXPECT_EQ(2, back->pipeline_depth);
  EXPECT_EQ(1, back->max_staleness);
  EXPECT_FALSE(back->prefetch);
  EXPECT_FALSE(back->early_pulls);
  EXPECT_NEAR(plan->predicted_samples_per_sec, back->predicted_samples_per_sec,
              1e-6 * plan->predicted_samples_per_sec);
  EXPECT_EQ(plan->stage_threads, back->stage_threads);
  Result<Json> json = ParseJsonText(plan->ToJson());
  ASSERT_TRUE(json.ok()) << json.status();
  Json edited = *json;
  edited["threads"] = 0;
  Result<Plan> bad = ParsePlanJson(edited.dump(2), "p.json");
  EXPECT_EQ(StatusCode::kInvalidArgument, bad.status().code());
  EXPECT_THAT(bad.status().message(), ::testing::HasSubstr("p.json: field \"threads\""));
  // The split: each stage a whole number of threads within the plan's.
  for (const char* split : {"[1, 1, 0, 3, 1]", "[1, 1, 4, 3, 1]", "[1, 1, 1.5, 3, 1]",
                            "[1, 1, \"1\", 3, 1]", "[1, 1, 3]"}) {
    edited = *json;
    edited["stage_threads"] = Json::parse(split);
    Result<Plan> wrong = ParsePlanJson(edited.dump(2), "p.json");
    EXPECT_EQ(StatusCode::kInvalidArgument, wrong.status().code()) << split;
    EXPECT_THAT(wrong.status().message(), ::testing::HasSubstr("p.json: field \"stage_threads"))
        << split;
  }
  // A plan written before there was a split has the trainer's default; a
  // field the reader does not know is an error.
  edited = *json;
  edited.erase("stage_threads");
  edited.erase("early_pulls");
  Result<Plan> without = ParsePlanJson(edited.dump(2), "p.json");
  ASSERT_TRUE(without.ok()) << without.status().ToString() << edited.dump(2);
  EXPECT_EQ(TrainerStageThreads(3, true), without->stage_threads);
  EXPECT_TRUE(without->early_pulls);
  edited["unused"] = 0;
  Result<Plan> unknown = ParsePlanJson(edited.dump(2), "p.json");
  EXPECT_THAT(unknown.status().message(),
              ::testing::HasSubstr("p.json: field \"unused\" is not a known field"));
  EXPECT_THAT(plan->ToDot(program), ::testing::HasSubstr("cluster_0"));
}

}  // namespace
}  // namespace ember::scheduler
