#include "scheduler/calibration.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "core/file.h"
#include "core/json.h"
#include "scheduler/cluster_file.h"
#include "tests/scheduler/scheduler_test_util.h"
#include "tests/testing/temp_dir.h"

namespace ember::scheduler {
namespace {

using CalibrationTest = ::ember::test::TempDirTest;

CalibrationOptions InDir(const std::string& dir) {
  CalibrationOptions options;
  options.cache_dir = dir;
  return options;
}

TEST_F(CalibrationTest, CachePathIsKeyedByHostAndCpu) {
  ResourceGraph a = test::Host(4, 1 << 30);
  ResourceGraph b = test::Host(4, 1 << 30);
  b.devices[0].model = "Other CPU";
  const std::string path = CalibrationCachePath(a, InDir(dir_.string()));
  EXPECT_EQ(0u, path.find(dir_.string() + "/calibration-h-"));
  EXPECT_NE(path, CalibrationCachePath(b, InDir(dir_.string())));
  EXPECT_EQ(path, CalibrationCachePath(test::Host(4, 1 << 30), InDir(dir_.string())));
}

TEST_F(CalibrationTest, ACachedCalibrationIsReadInsteadOfMeasured) {
  ResourceGraph measured = test::Host(4, 1 << 30);
  measured.devices[0].rates.pull_ns_per_row = 123.0;
  const std::string path = CalibrationCachePath(measured, InDir(dir_.string()));
  ASSERT_TRUE(WriteFileAtomic(path, CalibrationToJson(measured)).ok());
  ResourceGraph graph = test::Host(4, 1 << 30);
  graph.devices[0].rates = DeviceRates{};
  bool from_cache = false;
  ASSERT_TRUE(Calibrate(&graph, InDir(dir_.string()), &from_cache).ok());
  EXPECT_TRUE(from_cache);
  EXPECT_EQ(123.0, graph.devices[0].rates.pull_ns_per_row);
  EXPECT_EQ(20.0, graph.devices[0].rates.memory_gbps);
}

TEST_F(CalibrationTest, AMalformedCacheIsAnIOErrorNamingIt) {
  ResourceGraph graph = test::Host(4, 1 << 30);
  const std::string path = CalibrationCachePath(graph, InDir(dir_.string()));
  ASSERT_TRUE(WriteFileAtomic(path, "{\"h/cpu0\": {\"pull_ns_per_row\": }").ok());
  bool from_cache = false;
  const Status status = Calibrate(&graph, InDir(dir_.string()), &from_cache);
  EXPECT_EQ(StatusCode::kIOError, status.code());
  EXPECT_THAT(status.message(), ::testing::HasSubstr(path + ":1:"));
}

// Rates measured while other work kept the process off the cores (the
// probe's wait grows by more than the whole calibration took, and the
// process got no CPU time) are used for this plan but not cached: the next
// plan measures again.
TEST_F(CalibrationTest, RatesMeasuredOnABusyMachineAreUsedButNotCached) {
  ResourceGraph graph = test::Host(1, 1 << 30);
  graph.devices[0].rates = DeviceRates{};
  CalibrationOptions options = InDir(dir_.string());
  int probes = 0;
  options.run_queue_wait_seconds = [&probes] { return 1e6 * probes++; };
  options.process_cpu_seconds = [] { return 0.0; };  // and it got no CPU
  bool from_cache = true;
  ASSERT_TRUE(Calibrate(&graph, options, &from_cache).ok());
  EXPECT_FALSE(from_cache);
  EXPECT_EQ(2, probes);
  EXPECT_GT(graph.devices[0].rates.gemm_gflops, 0.0);
  EXPECT_FALSE(FileExists(CalibrationCachePath(graph, options)));
}

// Version 1 counted the sort of the unique keys in unique_ns_per_key (its
// rates would double-count it) and older versions lack rates: Calibrate
// measures again.
TEST_F(CalibrationTest, ACacheOfAnotherVersionIsRefused) {
  ResourceGraph graph = test::Host(4, 1 << 30);
  std::string text = CalibrationToJson(graph);
  const Status current = CalibrationFromJson(text, "c.json", &graph);
  EXPECT_TRUE(current.ok()) << current.ToString();
  // Whatever the current version, version 1 is another.
  const std::string field = "\"version\": ";
  const size_t at = text.find(field);
  ASSERT_NE(std::string::npos, at) << text;
  const size_t digits = text.find_first_not_of("0123456789", at + field.size());
  ASSERT_GT(digits, at + field.size()) << text;
  ASSERT_NE("1", text.substr(at + field.size(), digits - at - field.size()));
  text.replace(at + field.size(), digits - at - field.size(), "1");
  const Status old = CalibrationFromJson(text, "c.json", &graph);
  EXPECT_EQ(StatusCode::kFailedPrecondition, old.code());
  EXPECT_THAT(old.message(), ::testing::HasSubstr("c.json"));
}

TEST_F(CalibrationTest, DiskRatesAreMeasuredInTheGivenDirectory) {
  Result<DeviceRates> rates = MeasureDiskRates(dir_.string());
  ASSERT_TRUE(rates.ok()) << rates.status().ToString();
  EXPECT_GT(rates->random_reads_per_sec, 0);
  EXPECT_GT(rates->read_gbps, 0);
  EXPECT_EQ(StatusCode::kIOError, MeasureDiskRates(dir_.string() + "/missing").status().code());
}

// A cache that Calibrate wrote before nlohmann, for the first host of the
// tools' 8x8 cluster file without its NVLink (tests/scheduler/testdata):
// the NVLink keeps its bandwidth.
TEST(CalibrationFileTest, AFileWrittenByTheOlderWriterLoadsWithItsValues) {
  Result<ResourceGraph> graph = ReadClusterFile(EMBER_CLUSTER_FILE);
  ASSERT_TRUE(graph.ok()) << graph.status();
  for (DeviceNode& node : graph->devices) node.rates = DeviceRates{};
  for (Link& link : graph->links) link.gbps = 1.0;
  const std::string path = std::string(EMBER_SCHEDULER_TESTDATA) + "/calibration_gpu_node.json";
  Result<std::string> text = ReadFile(path);
  ASSERT_TRUE(text.ok()) << text.status();
  const Status read = CalibrationFromJson(*text, path, &*graph);
  ASSERT_TRUE(read.ok()) << read;
  const DeviceRates& cpu0 = graph->devices[0].rates;
  EXPECT_EQ(61.25, cpu0.pull_ns_per_row);
  EXPECT_EQ(3.5, cpu0.tier_pull_us_per_miss);
  EXPECT_EQ(150.0, cpu0.memory_gbps);
  EXPECT_EQ(0.8, cpu0.pull_ns_per_float);
  EXPECT_EQ(60.0, graph->devices[1].rates.pull_ns_per_row);
  const std::vector<int> gpus = graph->DevicesOf(DeviceKind::kGpu, 0);
  ASSERT_EQ(8u, gpus.size());
  EXPECT_EQ(50000.0, graph->devices[gpus[5]].rates.gemm_gflops);
  EXPECT_EQ(std::make_pair(25.0, 5.0), graph->PathBetween(0, gpus[0]));
  EXPECT_EQ(std::make_pair(1.0, 3.0), graph->PathBetween(gpus[0], gpus[1]));
  // Host 1 is not in the file.
  EXPECT_EQ(0.0, graph->devices[graph->DevicesOf(DeviceKind::kCpu, 1)[0]].rates.memory_gbps);
  // Written again, it reads back to the same rates.
  ResourceGraph again = *graph;
  for (DeviceNode& node : again.devices) node.rates = DeviceRates{};
  ASSERT_TRUE(CalibrationFromJson(CalibrationToJson(*graph), "c.json", &again).ok());
  EXPECT_EQ(CalibrationToJson(*graph), CalibrationToJson(again));
}

TEST(CalibrationFileTest, AMissingOrUnknownFieldIsAnErrorNamingIt) {
  ResourceGraph graph = test::Host(4, 1 << 30);
  Result<Json> json = ParseJsonText(CalibrationToJson(graph));
  ASSERT_TRUE(json.ok()) << json.status();
  Json edited = *json;
  edited.erase("host");
  EXPECT_EQ("c.json: field \"host\" is missing",
            CalibrationFromJson(edited.dump(2), "c.json", &graph).message());
  edited = *json;
  edited["h/cpu0"]["pull_ns"] = 1;
  EXPECT_EQ("c.json: field \"h/cpu0.pull_ns\" is not a known field",
            CalibrationFromJson(edited.dump(2), "c.json", &graph).message());
  edited = *json;
  edited["h/cpu0"] = 3;
  EXPECT_EQ("c.json: field \"h/cpu0\" is not an object",
            CalibrationFromJson(edited.dump(2), "c.json", &graph).message());
}

TEST(PinnedCopyTest, SkipsCleanlyWithoutAGpu) {
  if (CudaDeviceAvailable()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_EQ(StatusCode::kFailedPrecondition, MeasurePinnedCopyGbps(0).status().code());
}

}  // namespace
}  // namespace ember::scheduler
