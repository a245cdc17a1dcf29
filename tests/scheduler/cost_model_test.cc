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
  EXPECT_EQ((PerStage<double>{2.0, 0.5, 1.0, 1.0, 1.0}), cost.stage_scales().pipelined);
  cost.Refine({1.0, 1.0, 1.0, 1.0, 1.0}, {2.0, 2.0, 2.0, 2.0, 2.0}, true);
  EXPECT_EQ((PerStage<double>{4.0, 1.0, 2.0, 2.0, 2.0}), cost.stage_scales().pipelined);
  EXPECT_EQ((PerStage<double>{1, 1, 1, 1, 1}), cost.stage_scales().sequential);
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
  const int dense = before.stage_index[Stage::kDense];
  EXPECT_DOUBLE_EQ(3 * before.stages[dense].seconds, after.stages[dense].seconds);
  setup.pipelined = true;  // Refined for sequential runs only.
  EXPECT_DOUBLE_EQ(before.stages[dense].seconds,
                   cost.Estimate(program, setup).stages[dense].seconds);
}

// The trainer sorts a batch's distinct keys for the staleness gate only
// when it pipelines: n log2 n at the calibrated cost, on top of hashing.
TEST(CostModelTest, OnlyPipelinedRunsPayForSortingTheUniqueKeys) {
  ResourceGraph graph = OneHost(2, 10.0, 20.0, 10.0);
  graph.devices[0].rates.unique_ns_per_key = 30.0;
  graph.devices[0].rates.sort_ns_per_key_log2 = 5.0;
  const Program program = test::MlpProgram(64);
  const CostModel cost(&graph);
  StepSetup setup;
  setup.pipelined = false;
  const StepCost sequential = cost.Estimate(program, setup);
  const double ids = program.sparse.ids_per_example * setup.batch;
  EXPECT_DOUBLE_EQ(ids * 30e-9, sequential.stages[sequential.stage_index[Stage::kUnique]].seconds);
  setup.pipelined = true;
  const StepCost pipelined = cost.Estimate(program, setup);
  const double u = pipelined.unique_ids;
  EXPECT_DOUBLE_EQ(ids * 30e-9 + u * std::log2(u) * 5e-9,
                   pipelined.stages[pipelined.stage_index[Stage::kUnique]].seconds);
}

TEST(CostModelTest, TheDenseStageIsATeamOnACpuNotOnAGpu) {
  const Program program = test::MlpProgram(64);
  const ResourceGraph graph = test::Host(4, int64_t{64} << 30, /*gpus=*/1, int64_t{16} << 30);
  const CostModel cost(&graph);
  StepSetup setup;
  const StepCost on_cpu = cost.Estimate(program, setup);
  EXPECT_TRUE(on_cpu.stages[on_cpu.stage_index[Stage::kDense]].team);
  EXPECT_FALSE(on_cpu.stages[on_cpu.stage_index[Stage::kPull]].team);
  setup.dense_device = graph.DevicesOf(DeviceKind::kGpu)[0];
  const StepCost on_gpu = cost.Estimate(program, setup);
  EXPECT_FALSE(on_gpu.stages[on_gpu.stage_index[Stage::kDense]].team);
}

// A miss of the memory tier costs at least the disk's random read; the
// prefetcher's threads keep cores busy only for the rest of it.
TEST(CostModelTest, TheDiskStageUsesCoresOnlyWhileNotWaitingOnTheDevice) {
  const Program program = test::MlpProgram(64, 1000000, 10000000);
  ResourceGraph graph = test::Host(4, int64_t{64} << 30);
  const int disk = graph.DevicesOf(DeviceKind::kDisk)[0];
  graph.devices[disk].rates.tier_pull_us_per_miss = 20.0;
  CostModelOptions options;
  options.prefetch_threads = 2;
  StepSetup setup;
  setup.memory_budget_bytes = 1 << 20;
  auto disk_stage = [&](double reads_per_sec) {
    graph.devices[disk].rates.random_reads_per_sec = reads_per_sec;
    const StepCost step = CostModel(&graph, options).Estimate(program, setup);
    for (const SimStage& s : step.stages) {
      if (s.name == "disk") return std::make_pair(s, step.disk_rows);
    }
    return std::make_pair(SimStage{}, 0.0);
  };
  // 10 us per read: half of the 20 us per miss waits on the device.
  auto [fast, rows] = disk_stage(100000);
  ASSERT_GT(rows, 0);
  EXPECT_DOUBLE_EQ(rows * 20e-6 / std::pow(2, 0.8), fast.seconds);
  EXPECT_DOUBLE_EQ(2 * 0.5, fast.cores);
  // 100 us per read: the miss is the read, the threads wait on the device.
  auto [slow, slow_rows] = disk_stage(10000);
  EXPECT_DOUBLE_EQ(slow_rows * 100e-6 / std::pow(2, 0.8), slow.seconds);
  EXPECT_DOUBLE_EQ(0.0, slow.cores);
}

// A row pulled for the first time costs its calibrated creation; where
// creation was not measured, a push stands in for it.
TEST(CostModelTest, NewRowsCostTheirCreation) {
  const Program program = test::MlpProgram(64, 1000000, 10000000);
  ResourceGraph graph = test::Host(4, int64_t{64} << 30);
  DeviceRates& cpu = graph.devices[graph.DevicesOf(DeviceKind::kCpu)[0]].rates;
  cpu.push_ns_per_row = cpu.push_ns_per_row_large = 100.0;
  StepSetup setup;
  setup.threads = PerStage<int>::Filled(1);
  auto pull = [&] {
    const StepCost step = CostModel(&graph).Estimate(program, setup);
    return step.stages[step.stage_index[Stage::kPull]].seconds;
  };
  const double new_rows =
      program.TableRows() / (static_cast<double>(program.sparse.training_examples) / setup.batch);
  const double as_push = pull();
  cpu.create_ns_per_row = cpu.create_ns_per_row_large = 700.0;
  // Both add the same cost per float beyond 16: the difference is 600 ns.
  EXPECT_NEAR(new_rows * 600e-9, pull() - as_push, 1e-9);
}

// With a disk tier, the rows a run creates beyond what memory holds are
// spilled: each costs the pull the calibrated create-and-evict time.
TEST(CostModelTest, RowsCreatedBeyondTheMemoryTierCostASpillEach) {
  const Program program = test::MlpProgram(64, 1000000, 10000000);
  ResourceGraph graph = test::Host(4, int64_t{64} << 30);
  const int disk = graph.DevicesOf(DeviceKind::kDisk)[0];
  StepSetup setup;
  setup.memory_budget_bytes = 64 << 20;
  setup.threads = PerStage<int>::Filled(1);
  auto pull = [&](double create_us) {
    graph.devices[disk].rates.tier_create_us_per_row = create_us;
    const StepCost step = CostModel(&graph).Estimate(program, setup);
    return step.stages[step.stage_index[Stage::kPull]].seconds;
  };
  const CostModel cost(&graph);
  const double rows = program.TableRows();
  const double held = setup.memory_budget_bytes / cost.RowBytes(program, 0);
  const double new_rows =
      rows / (static_cast<double>(program.sparse.training_examples) / setup.batch);
  EXPECT_NEAR(new_rows * (1.0 - held / rows) * 30e-6, pull(40.0) - pull(10.0), 1e-12);
}

// A miss costs more in a larger disk tier: the calibrated costs of the two
// tier sizes are interpolated by log of the table's rows, and the line goes
// on beyond the larger size (an LSM tree's levels grow with the log of its
// rows).
TEST(CostModelTest, TheDiskTiersCostPerMissFollowsTheTableSize) {
  ResourceGraph graph = test::Host(4, int64_t{64} << 30);
  const int disk = graph.DevicesOf(DeviceKind::kDisk)[0];
  DeviceRates& r = graph.devices[disk].rates;
  r.random_reads_per_sec = 1e9;  // The read itself costs next to nothing.
  r.tier_pull_us_per_miss = 4.0;
  r.tier_pull_us_per_miss_large = 8.0;
  StepSetup setup;
  setup.memory_budget_bytes = 1 << 20;
  auto miss_us = [&](const Program& program) {
    const StepCost step = CostModel(&graph).Estimate(program, setup);
    for (const SimStage& s : step.stages) {
      if (s.name == "disk") return s.seconds / step.disk_rows * std::pow(2, 0.8) * 1e6;
    }
    return 0.0;
  };
  const Program small = test::MlpProgram(64, 1000, 100000);
  ASSERT_LT(small.TableRows(), kSmallTierRows);
  EXPECT_NEAR(4.0, miss_us(small), 1e-9);
  const Program middle = test::MlpProgram(64, 4000, 1000000);
  ASSERT_GT(middle.TableRows(), kSmallTierRows);
  ASSERT_LT(middle.TableRows(), kLargeTierRows);
  EXPECT_NEAR(4.0 + 4.0 * std::log(middle.TableRows() / kSmallTierRows) /
                        std::log(kLargeTierRows / kSmallTierRows),
              miss_us(middle), 1e-9);
  const Program huge = test::MlpProgram(64, 1000000, 10000000);
  ASSERT_GT(huge.TableRows(), 4 * kLargeTierRows);
  EXPECT_NEAR(4.0 + 4.0 * std::log(huge.TableRows() / kSmallTierRows) /
                        std::log(kLargeTierRows / kSmallTierRows),
              miss_us(huge), 1e-9);
  // Without the larger table's rate, the smaller one's holds at every size.
  r.tier_pull_us_per_miss_large = 0.0;
  EXPECT_NEAR(4.0, miss_us(huge), 1e-9);
}

}  // namespace
}  // namespace ember::scheduler
