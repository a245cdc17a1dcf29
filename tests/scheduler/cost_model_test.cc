#include "scheduler/cost_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/scheduler/scheduler_test_util.h"

namespace ember::scheduler {
namespace {

struct CollectiveCase {
  double bytes;
  int ranks;
  double gbps;
  double latency_us;
};

// Table-driven against the textbook formulas (Thakur, Rabenseifner & Gropp
// 2005): ring all-reduce moves 2 (n - 1) / n of the data over each link in
// 2 (n - 1) steps; a pairwise all-to-all moves (n - 1) / n in n - 1 steps.
TEST(CostModelTest, CollectivesFollowTheStandardFormulas) {
  const std::vector<CollectiveCase> cases = {
      {1e9, 8, 100.0, 5.0}, {4e6, 64, 12.5, 10.0}, {1.0, 2, 1.0, 0.0}, {3e7, 3, 25.0, 2.0}};
  for (const CollectiveCase& c : cases) {
    const double n = c.ranks, bw = c.gbps * 1e9, lat = c.latency_us * 1e-6;
    EXPECT_DOUBLE_EQ(2 * (n - 1) / n * c.bytes / bw + 2 * (n - 1) * lat,
                     CostModel::RingAllReduceSeconds(c.bytes, c.ranks, c.gbps, c.latency_us));
    EXPECT_DOUBLE_EQ((n - 1) / n * c.bytes / bw + (n - 1) * lat,
                     CostModel::AllToAllSeconds(c.bytes, c.ranks, c.gbps, c.latency_us));
    EXPECT_DOUBLE_EQ(lat + c.bytes / bw, CostModel::TransferSeconds(c.bytes, c.gbps, c.latency_us));
  }
  EXPECT_EQ(0.0, CostModel::RingAllReduceSeconds(1e9, 1, 10.0, 5.0));
  EXPECT_EQ(0.0, CostModel::AllToAllSeconds(1e9, 1, 10.0, 5.0));
}

ResourceGraph OneHost(int cores, double gflops_per_core, double gflops_all, double gbps) {
  ResourceGraph graph;
  graph.hosts.push_back({"h", {}});
  DeviceNode cpu;
  cpu.cores = cores;
  cpu.rates.gemm_gflops_per_core = gflops_per_core;
  cpu.rates.gemm_gflops = gflops_all;
  cpu.rates.memory_gbps = gbps;
  graph.AddDevice(0, DeviceKind::kCpu, cpu);
  return graph;
}

TEST(CostModelTest, DenseOpIsTheRooflineOfItsTasksPlusTheirOverhead) {
  const ResourceGraph graph = OneHost(4, 50.0, 200.0, 20.0);
  CostModelOptions options;
  options.cpu_call_overhead_us = 3.0;
  const CostModel cost(&graph, options);
  ProgramOp gemm{"fc", "fully_connected", false, Stage::kDense, {1e6, 1e3}, {2e6, 2e3}, {}, {}};
  const int64_t b = 128;
  // Compute-bound: flops over 4 cores at 50 GFLOP/s each (measured 200).
  EXPECT_DOUBLE_EQ(3e6 * b / 200e9 + 2 * 3e-6, cost.DenseOpSeconds(gemm, b, 0, 4));
  EXPECT_DOUBLE_EQ(3e6 * b / 50e9 + 2 * 3e-6, cost.DenseOpSeconds(gemm, b, 0, 1));
  // Memory-bound: bytes at the one-thread bandwidth times threads^0.8.
  ProgramOp concat{"cat", "concat", false, Stage::kDense, {0, 1e5}, {0, 1e5}, {}, {}};
  EXPECT_DOUBLE_EQ(2e5 * b / (20e9 * std::pow(2, 0.8)) + 2 * 3e-6,
                   cost.DenseOpSeconds(concat, b, 0, 2));
  EXPECT_DOUBLE_EQ(2e5 * b / 20e9 + 2 * 3e-6, cost.DenseOpSeconds(concat, b, 0, 1));
}

TEST(CostModelTest, GemmRateIsCappedByTheMeasuredRateOfAllCores) {
  const ResourceGraph graph = OneHost(4, 50.0, 160.0, 20.0);
  const CostModel cost(&graph);
  EXPECT_DOUBLE_EQ(50.0, cost.GemmGflops(0, 1));
  EXPECT_DOUBLE_EQ(160.0, cost.GemmGflops(0, 4));
  EXPECT_DOUBLE_EQ(160.0, cost.GemmGflops(0, 16));  // No more than the cores.
  EXPECT_GT(cost.GemmGflops(0, 3), cost.GemmGflops(0, 2));
}

TEST(CostModelTest, RefineScalesEachStageByMeasuredOverPredicted) {
  const ResourceGraph graph = OneHost(2, 10.0, 20.0, 10.0);
  CostModel cost(&graph);
  cost.Refine({1.0, 2.0, 4.0, 0.0, 1.0}, {2.0, 1.0, 4.0, 3.0, 0.0}, /*pipelined=*/true);
  EXPECT_EQ((std::array<double, kNumStages>{2.0, 0.5, 1.0, 1.0, 1.0}),
            cost.stage_scales().pipelined);
  cost.Refine({1.0, 1.0, 1.0, 1.0, 1.0}, {2.0, 2.0, 2.0, 2.0, 2.0}, true);
  EXPECT_EQ((std::array<double, kNumStages>{4.0, 1.0, 2.0, 2.0, 2.0}),
            cost.stage_scales().pipelined);
  EXPECT_EQ((std::array<double, kNumStages>{1, 1, 1, 1, 1}), cost.stage_scales().sequential);
}

TEST(CostModelTest, RefinedScalesMultiplyThePredictedStageTimes) {
  const ResourceGraph graph = OneHost(2, 10.0, 20.0, 10.0);
  const Program program = test::MlpProgram(64);
  CostModel cost(&graph);
  StepSetup setup;
  setup.pipelined = false;
  const StepCost before = cost.Estimate(program, setup);
  cost.Refine({1, 1, 1, 1, 1}, {1, 1, 1, 3, 1}, /*pipelined=*/false);
  const StepCost after = cost.Estimate(program, setup);
  const int dense = before.stage_index[3];
  EXPECT_DOUBLE_EQ(3 * before.stages[dense].seconds, after.stages[dense].seconds);
  setup.pipelined = true;  // Refined for sequential runs only.
  EXPECT_DOUBLE_EQ(before.stages[dense].seconds,
                   cost.Estimate(program, setup).stages[dense].seconds);
}

}  // namespace
}  // namespace ember::scheduler
