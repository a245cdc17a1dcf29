#include "scheduler/resource_graph.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/json.h"
#include "scheduler/cluster_file.h"

namespace ember::scheduler {
namespace {

using ::testing::HasSubstr;

// /proc/cpuinfo of a machine with `sockets` sockets of `threads` threads.
std::string FakeCpuinfo(int sockets, int threads) {
  std::string text;
  int processor = 0;
  for (int s = 0; s < sockets; ++s) {
    for (int t = 0; t < threads; ++t) {
      text += "processor\t: " + std::to_string(processor++) + "\n";
      text += "model name\t: Fake CPU 9000\n";
      text += "physical id\t: " + std::to_string(s) + "\n\n";
    }
  }
  return text;
}

SystemSnapshot FakeMachine() {
  SystemSnapshot snapshot;
  snapshot.host_name = "fake";
  snapshot.cpuinfo = FakeCpuinfo(2, 4);
  snapshot.meminfo = "MemTotal:       16777216 kB\nMemFree:         1000 kB\n";
  snapshot.disk_path = "/data";
  snapshot.disk_free_bytes = int64_t{100} << 30;
  snapshot.gpus = {{"gpu a", int64_t{16} << 30}, {"gpu b", int64_t{16} << 30}};
  return snapshot;
}

TEST(DescribeHostTest, FindsSocketsThreadsMemoryGpusAndDisk) {
  const ResourceGraph graph = DescribeHost(FakeMachine());
  ASSERT_EQ(1u, graph.hosts.size());
  EXPECT_EQ("fake", graph.host_name());
  const std::vector<int> cpus = graph.DevicesOf(DeviceKind::kCpu);
  ASSERT_EQ(2u, cpus.size());
  EXPECT_EQ(4, graph.devices[cpus[0]].cores);
  EXPECT_EQ(int64_t{8} << 30, graph.devices[cpus[0]].memory_bytes);  // Half of 16 GiB.
  EXPECT_EQ("Fake CPU 9000", graph.devices[cpus[1]].model);
  EXPECT_EQ(8, graph.cpu_threads());
  EXPECT_EQ(int64_t{16} << 30, graph.memory_bytes());
  const std::vector<int> gpus = graph.DevicesOf(DeviceKind::kGpu);
  ASSERT_EQ(2u, gpus.size());
  EXPECT_EQ("fake/gpu1", graph.devices[gpus[1]].id);
  EXPECT_EQ(std::vector<Device>({Device::Cuda(0), Device::Cuda(1)}), graph.cuda_devices());
  const Link* pcie = graph.LinkBetween(cpus[0], gpus[1]);
  ASSERT_NE(nullptr, pcie);
  EXPECT_EQ(LinkKind::kPcie, pcie->kind);
  const std::vector<int> disks = graph.DevicesOf(DeviceKind::kDisk);
  ASSERT_EQ(1u, disks.size());
  EXPECT_EQ(int64_t{100} << 30, graph.devices[disks[0]].memory_bytes);
  EXPECT_THAT(graph.Summary(), HasSubstr("8 CPU threads (2 sockets, Fake CPU 9000)"));
}

TEST(DescribeHostTest, EmptyCpuinfoStillGivesOneSocket) {
  SystemSnapshot snapshot;
  const ResourceGraph graph = DescribeHost(snapshot);
  ASSERT_EQ(1u, graph.DevicesOf(DeviceKind::kCpu).size());
  EXPECT_GE(graph.cpu_threads(), 1);
  EXPECT_TRUE(graph.DevicesOf(DeviceKind::kDisk).empty());  // Free space unknown.
}

TEST(DiscoverLocalHostTest, FindsAtLeastOneThreadAndSomeMemory) {
  const ResourceGraph graph = DiscoverLocalHost();
  EXPECT_GE(graph.cpu_threads(), 1);
  EXPECT_GT(graph.memory_bytes(), 0);
  EXPECT_EQ(static_cast<size_t>(CudaDeviceCount()), graph.cuda_devices().size());
}

constexpr char kTwoHosts[] = R"({
  "hosts": [{"name": "node", "count": 2,
             "sockets": [{"cores": 16, "memory_gb": 64, "rates": {"memory_gbps": 50}}],
             "gpus": [{"count": 2, "memory_gb": 40, "pcie_gbps": 20}],
             "nvlink_gbps": 100, "nvlink_latency_us": 2,
             "disks": [{"free_gb": 500}]}],
  "network": {"gbps": 10, "latency_us": 20}
})";

TEST(ClusterFileTest, ExpandsCountsAndJoinsDevicesWithLinks) {
  Result<ResourceGraph> graph = ParseClusterFile(kTwoHosts, "c.json");
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  ASSERT_EQ(2u, graph->hosts.size());
  EXPECT_EQ("node1", graph->hosts[1].name);
  const std::vector<int> gpus = graph->DevicesOf(DeviceKind::kGpu);
  ASSERT_EQ(4u, gpus.size());
  EXPECT_EQ(int64_t{40} << 30, graph->devices[gpus[0]].memory_bytes);
  EXPECT_EQ(50.0, graph->devices[graph->DevicesOf(DeviceKind::kCpu)[1]].rates.memory_gbps);
  // Same host: NVLink; other host: through PCIe, the network and PCIe.
  EXPECT_EQ(LinkKind::kNvlink, graph->LinkBetween(gpus[0], gpus[1])->kind);
  EXPECT_EQ(std::make_pair(100.0, 2.0), graph->PathBetween(gpus[0], gpus[1]));
  EXPECT_EQ(nullptr, graph->LinkBetween(gpus[0], gpus[2]));
  // Slowest hop 10 GB/s; latency 10 (default PCIe) + 20 + 10.
  EXPECT_EQ(std::make_pair(10.0, 40.0), graph->PathBetween(gpus[0], gpus[2]));
}

TEST(ClusterFileTest, ErrorsSayWhatAndWhere) {
  struct Case {
    std::string text;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"{\n  \"hosts\": [\n    {\"name\": }\n  ]\n}",
       "c.json:3:14: malformed JSON (malformed JSON near byte 28: parse error at line 3, column "
       "14: syntax error"},
      {R"({"hosts": [{"sockets": [{"cores": 4, "memory_gb": -1}]}]})",
       "c.json: field \"hosts[0].sockets[0].memory_gb\" is -1; expected a number >= 0"},
      {R"({"hosts": [{"sockets": [{"cores": 0}]}]})", "hosts[0].sockets[0].cores"},
      {R"({"hosts": [{"sockets": [{"cores": 4, "memroy_gb": 1}]}]})",
       "field \"hosts[0].sockets[0].memroy_gb\" is not a known field"},
      {R"({"hosts": [{"sockets": [{"cores": 4, "rates": {"gemm": 1}}]}]})",
       "field \"hosts[0].sockets[0].rates.gemm\" is not a known field"},
      {R"({"hosts": [{"sockets": [{"cores": 2.5}]}]})",
       "field \"hosts[0].sockets[0].cores\" is not an integer"},
      {R"({"hosts": [], "network": {"gbps": 1}})", "expected at least one host"},
      {R"({"hosts": [{"gpus": [{"memory_gb": 1}]}]})", "a host needs a socket"},
      {R"({"hosts": [{"sockets": [{"cores": 1}]}], "network": {"gbps": "fast"}})", "network.gbps"},
      {R"({"hosts": [{"sockets": [{"cores": 1}]}], "networks": {}})",
       "field \"networks\" is not a known field"},
      {"[1, 2]", "is not an object"},
  };
  for (const Case& c : cases) {
    Result<ResourceGraph> graph = ParseClusterFile(c.text, "c.json");
    ASSERT_FALSE(graph.ok()) << c.text;
    EXPECT_EQ(StatusCode::kInvalidArgument, graph.status().code());
    EXPECT_THAT(graph.status().message(), HasSubstr(c.message)) << c.text;
    EXPECT_THAT(graph.status().message(), HasSubstr("c.json")) << c.text;
  }
}

TEST(ClusterFileTest, RatesRoundTripThroughJson) {
  DeviceRates rates;
  rates.gemm_gflops = 12.5;
  rates.pull_ns_per_row = 70;
  const Json json = rates;
  EXPECT_EQ(R"({"gemm_gflops":12.5,"pull_ns_per_row":70.0})", json.dump());
  Result<DeviceRates> back = FromJson<DeviceRates>(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(12.5, back->gemm_gflops);
  EXPECT_EQ(70.0, back->pull_ns_per_row);
  EXPECT_EQ(0.0, back->push_ns_per_row);
}

// The cluster file of the tools' tests, read as before nlohmann read it.
TEST(ClusterFileTest, TheEightByEightClusterFileReadsToItsGraph) {
  Result<ResourceGraph> graph = ReadClusterFile(EMBER_CLUSTER_FILE);
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_EQ(8u, graph->hosts.size());
  EXPECT_EQ("gpu-node7", graph->hosts[7].name);
  const std::vector<int> cpus = graph->DevicesOf(DeviceKind::kCpu);
  const std::vector<int> gpus = graph->DevicesOf(DeviceKind::kGpu);
  const std::vector<int> disks = graph->DevicesOf(DeviceKind::kDisk);
  ASSERT_EQ(16u, cpus.size());
  ASSERT_EQ(64u, gpus.size());
  ASSERT_EQ(8u, disks.size());
  const DeviceNode& cpu = graph->devices[cpus[1]];
  EXPECT_EQ("gpu-node0/cpu1", cpu.id);
  EXPECT_EQ(48, cpu.cores);
  EXPECT_EQ(int64_t{1024} << 30, cpu.memory_bytes);
  EXPECT_EQ("Xeon 8468", cpu.model);
  EXPECT_EQ(0.8, cpu.rates.pull_ns_per_float);
  EXPECT_EQ(75.0, cpu.rates.row_overhead_bytes);
  const DeviceNode& gpu = graph->devices[gpus[3]];
  EXPECT_EQ("H100-SXM", gpu.model);
  EXPECT_EQ(int64_t{80} << 30, gpu.memory_bytes);
  EXPECT_EQ(50000.0, gpu.rates.gemm_gflops);
  EXPECT_EQ(int64_t{3500} << 30, graph->devices[disks[0]].memory_bytes);
  EXPECT_EQ(6.0, graph->devices[disks[0]].rates.read_gbps);
  // GPUs hang off the sockets in turn; NVLink within a host; the network
  // between hosts.
  EXPECT_EQ(std::make_pair(25.0, 5.0), graph->PathBetween(cpus[1], gpus[3]));
  EXPECT_EQ(std::make_pair(300.0, 3.0), graph->PathBetween(gpus[0], gpus[7]));
  EXPECT_EQ(LinkKind::kNetwork, graph->LinkBetween(cpus[0], cpus[2])->kind);
  EXPECT_EQ(std::make_pair(25.0, 5.0), graph->PathBetween(cpus[0], cpus[2]));
  EXPECT_EQ(std::make_pair(6.0, 80.0), graph->PathBetween(cpus[0], disks[0]));
}

}  // namespace
}  // namespace ember::scheduler
