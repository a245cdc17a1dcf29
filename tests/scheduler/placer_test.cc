#include "scheduler/placer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "scheduler/cluster_file.h"
#include "tests/scheduler/scheduler_test_util.h"

namespace ember::scheduler {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kGiB = int64_t{1} << 30;

TEST(PlaceTest, ATableThatFitsStaysInMemory) {
  const Program program = test::MlpProgram(64);
  const ResourceGraph graph = test::Host(8, 64 * kGiB);
  const CostModel cost(&graph);
  Result<Placement> p = Place(program, cost, 256, PlacerOptions{});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(0, p->memory_tier_bytes);
  EXPECT_EQ(-1, p->disk);
  for (size_t i = 0; i < program.ops.size(); ++i) EXPECT_EQ(p->cpu, p->op_device[i]);
}

TEST(PlaceTest, UnderTightMemoryTheTableSpillsToDisk) {
  const Program program = test::MlpProgram(64, /*vocabulary=*/1000000, /*examples=*/10000000);
  const ResourceGraph graph = test::Host(8, 64 * kGiB);
  const CostModel cost(&graph);
  PlacerOptions options;
  options.memory_limit_bytes = 64 << 20;
  Result<Placement> p = Place(program, cost, 256, options);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_GT(p->table_bytes, options.memory_limit_bytes);
  EXPECT_EQ(options.memory_limit_bytes, p->memory_tier_bytes);
  EXPECT_EQ(graph.DevicesOf(DeviceKind::kDisk)[0], p->disk);
}

TEST(PlaceTest, ATableThatFitsNowhereIsResourceExhausted) {
  const Program program = test::MlpProgram(64, 1000000, 10000000);
  const ResourceGraph graph = test::Host(8, 64 * kGiB, 0, 0, /*disk_free=*/1 << 20);
  const CostModel cost(&graph);
  PlacerOptions options;
  options.memory_limit_bytes = 64 << 20;
  Result<Placement> p = Place(program, cost, 256, options);
  EXPECT_EQ(StatusCode::kResourceExhausted, p.status().code());
  EXPECT_THAT(p.status().message(), HasSubstr("embedding table needs"));
  EXPECT_THAT(p.status().message(), HasSubstr("disk has"));
}

TEST(PlaceTest, DenseGoesToTheGpuWhenItFitsAndIsFaster) {
  const Program program = test::MlpProgram(4096);
  const ResourceGraph graph = test::Host(4, 64 * kGiB, 1, 16 * kGiB);
  const CostModel cost(&graph);
  Result<Placement> p = Place(program, cost, 1024, PlacerOptions{});
  ASSERT_TRUE(p.ok());
  const int gpu = graph.DevicesOf(DeviceKind::kGpu)[0];
  EXPECT_EQ(gpu, p->dense_device);
  for (size_t i = 0; i < program.ops.size(); ++i) {
    EXPECT_EQ(program.ops[i].sparse ? p->cpu : gpu, p->op_device[i]) << program.ops[i].name;
  }
}

TEST(PlaceTest, DenseStaysOnTheCpuWhenTheGpuCannotHoldIt) {
  const Program program = test::MlpProgram(4096);
  // 1.5 GiB of GPU memory less the 1 GiB reserve cannot hold the activations.
  const ResourceGraph graph = test::Host(4, 64 * kGiB, 1, 3 * kGiB / 2);
  const CostModel cost(&graph);
  ASSERT_GT(DenseMemoryBytes(program, 65536), kGiB / 2);
  Result<Placement> p = Place(program, cost, 65536, PlacerOptions{});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->cpu, p->dense_device);
  EXPECT_THAT(p->rationale, HasSubstr("more than a GPU holds"));
}

TEST(DenseMemoryBytesTest, ASavedIntermediateIsCountedOnceAndAnActivationTwice) {
  const SparseFeatures f = test::Features(1000, 100000);
  auto graph = test::CrossGraph(f.num_dense, f.num_slots, f.embedding_dim);
  Result<Program> program = BuildProgram("dcn", *graph, f);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  const int64_t batch = 512;
  double once = 0.0, twice = 0.0;
  for (const ProgramTensor& t : program->tensors) {
    if (t.producer < 0 || program->ops[t.producer].sparse) continue;
    (t.has_gradient ? twice : once) += t.bytes_per_example;
  }
  // The cross layer's z: 4 bytes per float of the 13 + 26 * 16 wide input.
  EXPECT_EQ(4.0 * (13 + 26 * 16), once);
  EXPECT_GT(twice, 0.0);
  EXPECT_DOUBLE_EQ(program->DenseStateBytes() + batch * (once + 2.0 * twice),
                   DenseMemoryBytes(*program, batch));
}

TEST(GreedyRingOrderTest, NeighboursShareTheFastestLinks) {
  Result<ResourceGraph> graph = ParseClusterFile(R"({
    "hosts": [{"name": "n", "count": 3, "sockets": [{"cores": 8}],
               "gpus": [{"count": 4}], "nvlink_gbps": 300}],
    "network": {"gbps": 10}})",
                                                 "c.json");
  ASSERT_TRUE(graph.ok());
  // Interleave the hosts' GPUs so that index order is the worst ring.
  std::vector<int> gpus;
  for (int g = 0; g < 4; ++g) {
    for (int h = 0; h < 3; ++h) gpus.push_back(graph->DevicesOf(DeviceKind::kGpu, h)[g]);
  }
  const std::vector<int> ring = GreedyRingOrder(*graph, gpus);
  ASSERT_EQ(gpus.size(), ring.size());
  int host_changes = 0;
  for (size_t i = 0; i + 1 < ring.size(); ++i) {
    host_changes += graph->devices[ring[i]].host != graph->devices[ring[i + 1]].host;
  }
  EXPECT_EQ(2, host_changes);  // One crossing between consecutive hosts.
  EXPECT_EQ(10.0, RingBottleneck(*graph, ring).first);
  EXPECT_EQ(300.0, RingBottleneck(*graph, {ring[0], ring[1]}).first);
}

}  // namespace
}  // namespace ember::scheduler
