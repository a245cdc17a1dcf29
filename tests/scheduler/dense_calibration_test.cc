#include "scheduler/dense_calibration.h"

#include <functional>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/file.h"
#include "core/json.h"
#include "core/threads.h"
#include "scheduler/cost_model.h"
#include "tests/scheduler/scheduler_test_util.h"
#include "tests/testing/temp_dir.h"

namespace ember::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using DenseCalibrationTest = ::ember::test::TempDirTest;

// Calibration options caching in `dir`, on a machine where nothing else runs
// (the process's threads never wait for a core).
CalibrationOptions InDir(const std::string& dir) {
  CalibrationOptions options;
  options.cache_dir = dir;
  options.run_queue_wait_seconds = [] { return 0.0; };
  // The process gets no CPU time: waiting, below, is then other work's doing.
  options.process_cpu_seconds = [] { return 0.0; };
  return options;
}

// A timer that answers threads * 1 ms + batch * 1 us, and 5 ms more on its
// first `slow_calls` calls (a burst of another process), and counts its
// calls.
struct FakeTimer {
  int calls = 0;
  int slow_calls = 0;
  DenseStepTimer timer() {
    return [this](int threads, int64_t batch) -> Result<double> {
      ++calls;
      return threads * 1e-3 + batch * 1e-6 + (calls <= slow_calls ? 5e-3 : 0.0);
    };
  }
};

TEST(DenseCalibrationPointsTest, FewThreadCountsAreAllMeasuredManyArePowersOfTwo) {
  EXPECT_THAT(DenseCalibrationThreads({2, 1}), ElementsAre(1, 2));
  EXPECT_THAT(DenseCalibrationThreads({3, 1, 3, 2}), ElementsAre(1, 2, 3));
  EXPECT_THAT(DenseCalibrationThreads({1, 2, 3, 4, 5, 6}), ElementsAre(1, 2, 4, 6));
  EXPECT_THAT(DenseCalibrationThreads({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}),
              ElementsAre(1, 2, 4, 8, 16));
  EXPECT_THAT(DenseCalibrationThreads({0, 3}), ElementsAre(3));
}

TEST(DenseCalibrationPointsTest, TheSmallestAndLargestBatchAreMeasured) {
  EXPECT_THAT(DenseCalibrationBatches({256}), ElementsAre(256));
  EXPECT_THAT(DenseCalibrationBatches({1024, 256, 4096, 256}), ElementsAre(256, 4096));
}

TEST_F(DenseCalibrationTest, AMeasurementIsCachedAndReadBackInsteadOfMeasured) {
  const ResourceGraph graph = test::Host(4, 1 << 30);
  FakeTimer fake;
  bool from_cache = true;
  Result<DenseMeasurement> measured = CalibrateDenseStep(graph, InDir(dir_.string()), "mlp", {1, 2},
                                                         {256, 1024}, fake.timer(), &from_cache);
  ASSERT_TRUE(measured.ok()) << measured.status().ToString();
  EXPECT_FALSE(from_cache);
  EXPECT_EQ(8, fake.calls);  // Two rounds over the four points.
  EXPECT_EQ(0, measured->device);
  ASSERT_EQ(4u, measured->points.size());
  EXPECT_EQ(2, measured->points[3].threads);
  EXPECT_EQ(1024, measured->points[3].batch);
  EXPECT_DOUBLE_EQ(2e-3 + 1024e-6, measured->points[3].seconds);

  Result<DenseMeasurement> cached = CalibrateDenseStep(graph, InDir(dir_.string()), "mlp", {1, 2},
                                                       {256, 1024}, fake.timer(), &from_cache);
  ASSERT_TRUE(cached.ok()) << cached.status().ToString();
  EXPECT_TRUE(from_cache);
  EXPECT_EQ(8, fake.calls);
  ASSERT_EQ(measured->points.size(), cached->points.size());
  for (size_t i = 0; i < cached->points.size(); ++i) {
    EXPECT_EQ(measured->points[i].threads, cached->points[i].threads);
    EXPECT_EQ(measured->points[i].batch, cached->points[i].batch);
    EXPECT_DOUBLE_EQ(measured->points[i].seconds, cached->points[i].seconds);
  }

  CalibrationOptions force = InDir(dir_.string());
  force.force = true;
  ASSERT_TRUE(
      CalibrateDenseStep(graph, force, "mlp", {1, 2}, {256, 1024}, fake.timer(), &from_cache).ok());
  EXPECT_FALSE(from_cache);
  EXPECT_EQ(16, fake.calls);
}

TEST_F(DenseCalibrationTest, EachPointKeepsTheFasterOfItsTwoRounds) {
  const ResourceGraph graph = test::Host(4, 1 << 30);
  FakeTimer fake;
  fake.slow_calls = 3;  // The whole first round and the second's first point.
  bool from_cache = true;
  Result<DenseMeasurement> measured = CalibrateDenseStep(graph, InDir(dir_.string()), "mlp", {1, 2},
                                                         {256}, fake.timer(), &from_cache);
  ASSERT_TRUE(measured.ok()) << measured.status().ToString();
  ASSERT_EQ(2u, measured->points.size());
  EXPECT_DOUBLE_EQ(1e-3 + 256e-6 + 5e-3, measured->points[0].seconds);
  EXPECT_DOUBLE_EQ(2e-3 + 256e-6, measured->points[1].seconds);
}

// A machine where other work keeps the process off the cores during the
// timings `busy` says (by call number, from 1): the probe's wait grows by a
// second over each of them.
struct BusyMachine {
  std::function<bool(int)> busy;
  FakeTimer* timer = nullptr;
  double waited = 0.0;
  std::function<double()> probe() {
    return [this] {
      // Called before and after each timing: after a busy one, it has grown.
      return waited;
    };
  }
  DenseStepTimer wrap(DenseStepTimer inner) {
    return [this, inner](int threads, int64_t batch) -> Result<double> {
      Result<double> seconds = inner(threads, batch);
      if (busy(timer->calls)) waited += 1.0;
      return seconds;
    };
  }
};

TEST_F(DenseCalibrationTest, TimingsOnABusyMachineAreTakenAgainAndACleanOneIsKept) {
  const ResourceGraph graph = test::Host(4, 1 << 30);
  FakeTimer fake;
  fake.slow_calls = 2;  // The busy timings are also the slow ones.
  BusyMachine machine{[](int call) { return call <= 2 || call == 4; }, &fake};
  CalibrationOptions options = InDir(dir_.string());
  options.run_queue_wait_seconds = machine.probe();
  bool from_cache = true;
  // Points (1, 256) and (2, 256): calls 1, 2 (round 1, busy), 3, 4 (round
  // 2; the second busy), 5 (an extra round for the second point only).
  Result<DenseMeasurement> measured = CalibrateDenseStep(graph, options, "mlp", {1, 2}, {256},
                                                         machine.wrap(fake.timer()), &from_cache);
  ASSERT_TRUE(measured.ok()) << measured.status().ToString();
  EXPECT_EQ(5, fake.calls);
  ASSERT_EQ(2u, measured->points.size());
  EXPECT_DOUBLE_EQ(1e-3 + 256e-6, measured->points[0].seconds);
  EXPECT_DOUBLE_EQ(2e-3 + 256e-6, measured->points[1].seconds);
  // Every point has a clean timing: cached.
  EXPECT_TRUE(
      CalibrateDenseStep(graph, options, "mlp", {1, 2}, {256}, fake.timer(), &from_cache).ok());
  EXPECT_TRUE(from_cache);
}

TEST_F(DenseCalibrationTest, AMachineBusyInEveryTimingGivesTimesThatAreUsedButNotCached) {
  const ResourceGraph graph = test::Host(4, 1 << 30);
  FakeTimer fake;
  BusyMachine machine{[](int) { return true; }, &fake};
  CalibrationOptions options = InDir(dir_.string());
  options.run_queue_wait_seconds = machine.probe();
  bool from_cache = true;
  Result<DenseMeasurement> measured = CalibrateDenseStep(graph, options, "mlp", {2}, {256},
                                                         machine.wrap(fake.timer()), &from_cache);
  ASSERT_TRUE(measured.ok()) << measured.status().ToString();
  EXPECT_FALSE(from_cache);
  EXPECT_EQ(5, fake.calls);  // Two rounds and three extra ones.
  ASSERT_EQ(1u, measured->points.size());
  EXPECT_DOUBLE_EQ(2e-3 + 256e-6, measured->points[0].seconds);
  const std::string path =
      DenseCalibrationCachePath(graph, options, DenseCalibrationDescriptor("mlp", {2}, {256}));
  EXPECT_FALSE(FileExists(path)) << path;
  // The next plan measures again.
  options.run_queue_wait_seconds = [] { return 0.0; };
  ASSERT_TRUE(
      CalibrateDenseStep(graph, options, "mlp", {2}, {256}, fake.timer(), &from_cache).ok());
  EXPECT_FALSE(from_cache);
  EXPECT_EQ(7, fake.calls);
  EXPECT_TRUE(FileExists(path));
}

TEST(MeasuredWhileBusyTest, WaitingCountsOnlyWhenTheProcessLackedItsCores) {
  const CalibrationOptions options;
  // 1 s on 2 threads.
  EXPECT_FALSE(MeasuredWhileBusy(options, 1.0, 2, 0.1, 1.0));  // hardly waited
  EXPECT_TRUE(MeasuredWhileBusy(options, 1.0, 2, 1.0, 1.0));   // waited, got half the cores
  // Waited for its own threads (OpenMP and oneTBB) but had both cores.
  EXPECT_FALSE(MeasuredWhileBusy(options, 1.0, 2, 1.0, 1.9));
  EXPECT_TRUE(MeasuredWhileBusy(options, 0.0, 1, 1.0, 0.0));  // no division by zero
}

TEST(ProcessRunQueueWaitTest, ItIsAFiniteNonNegativeCountThatNeverShrinks) {
  const double before = ProcessRunQueueWaitSeconds();
  volatile double sink = 0;
  for (int i = 0; i < 1000000; ++i) sink = sink + i;
  const double after = ProcessRunQueueWaitSeconds();
  EXPECT_GE(before, 0.0);
  EXPECT_GE(after, before);
  EXPECT_LT(after, 1e9);
}

TEST_F(DenseCalibrationTest, AnotherModelOrOtherPointsAreMeasuredApart) {
  const ResourceGraph graph = test::Host(4, 1 << 30);
  const CalibrationOptions options = InDir(dir_.string());
  const std::string a = DenseCalibrationDescriptor("mlp optimizer=adam", {1, 2}, {256});
  EXPECT_NE(DenseCalibrationCachePath(graph, options, a),
            DenseCalibrationCachePath(
                graph, options, DenseCalibrationDescriptor("mlp optimizer=sgd", {1, 2}, {256})));
  EXPECT_NE(
      DenseCalibrationCachePath(graph, options, a),
      DenseCalibrationCachePath(
          graph, options, DenseCalibrationDescriptor("mlp optimizer=adam", {1, 2, 4}, {256})));
  // Beside the host's calibration cache.
  const std::string host = CalibrationCachePath(graph, options);
  EXPECT_EQ(0u, DenseCalibrationCachePath(graph, options, a)
                    .find(host.substr(0, host.size() - 5) + ".dense-"));
}

TEST_F(DenseCalibrationTest, ACacheOfAnotherVersionOrDescriptorIsRefusedAndMeasuredAgain) {
  const ResourceGraph graph = test::Host(4, 1 << 30);
  DenseMeasurement measurement;
  measurement.points = {{2, 256, 0.005}};
  const std::string text = DenseCalibrationToJson(graph, "mlp threads=2 batch=256", measurement);
  Result<DenseMeasurement> same =
      DenseCalibrationFromJson(text, "d.json", graph, "mlp threads=2 batch=256");
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_DOUBLE_EQ(0.005, same->points[0].seconds);

  const Status other_model =
      DenseCalibrationFromJson(text, "d.json", graph, "dlrm threads=2 batch=256").status();
  EXPECT_EQ(StatusCode::kFailedPrecondition, other_model.code());
  EXPECT_THAT(other_model.message(), HasSubstr("d.json"));

  // Version 1 (which cached timings taken on a busy machine) is measured again.
  std::string old = text;
  const std::string current = "\"version\": 2";
  const size_t at = old.find(current);
  ASSERT_NE(std::string::npos, at) << old;
  old.replace(at, current.size(), "\"version\": 1");
  EXPECT_EQ(
      StatusCode::kFailedPrecondition,
      DenseCalibrationFromJson(old, "d.json", graph, "mlp threads=2 batch=256").status().code());

  // A file at the path of "mlp" holding another descriptor's points (or an
  // older version) is measured again and replaced.
  const CalibrationOptions options = InDir(dir_.string());
  const std::string path =
      DenseCalibrationCachePath(graph, options, DenseCalibrationDescriptor("mlp", {2}, {256}));
  ASSERT_TRUE(WriteFileAtomic(path, DenseCalibrationToJson(graph, "other", measurement)).ok());
  FakeTimer fake;
  bool from_cache = true;
  Result<DenseMeasurement> again =
      CalibrateDenseStep(graph, options, "mlp", {2}, {256}, fake.timer(), &from_cache);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(from_cache);
  EXPECT_EQ(2, fake.calls);
  EXPECT_DOUBLE_EQ(2e-3 + 256e-6, again->points[0].seconds);
  CalibrateDenseStep(graph, options, "mlp", {2}, {256}, fake.timer(), &from_cache)
      .status()
      .IgnoreError();
  EXPECT_TRUE(from_cache);
}

TEST_F(DenseCalibrationTest, AMalformedCacheIsAnIOErrorNamingIt) {
  const ResourceGraph graph = test::Host(4, 1 << 30);
  const CalibrationOptions options = InDir(dir_.string());
  const std::string path =
      DenseCalibrationCachePath(graph, options, DenseCalibrationDescriptor("mlp", {2}, {256}));
  ASSERT_TRUE(WriteFileAtomic(path, "{\"version\": 1, \"points\": [").ok());
  FakeTimer fake;
  bool from_cache = false;
  const Status status =
      CalibrateDenseStep(graph, options, "mlp", {2}, {256}, fake.timer(), &from_cache).status();
  EXPECT_EQ(StatusCode::kIOError, status.code());
  EXPECT_THAT(status.message(), HasSubstr(path));
  EXPECT_EQ(0, fake.calls);
}

TEST_F(DenseCalibrationTest, TheTimersErrorIsReturnedAndNothingIsCached) {
  const ResourceGraph graph = test::Host(4, 1 << 30);
  const CalibrationOptions options = InDir(dir_.string());
  bool from_cache = false;
  const DenseStepTimer failing = [](int, int64_t) -> Result<double> {
    return Status::InvalidArgument("--model=x is not known");
  };
  const Status status =
      CalibrateDenseStep(graph, options, "x", {1}, {256}, failing, &from_cache).status();
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_FALSE(FileExists(
      DenseCalibrationCachePath(graph, options, DenseCalibrationDescriptor("x", {1}, {256}))));
}

// The cost model and a measurement.

double DenseStage(const CostModel& cost, const Program& program, int64_t batch, int threads,
                  int device = 0) {
  StepSetup setup;
  setup.batch = batch;
  setup.pipelined = false;
  setup.threads = PerStage<int>::Filled(threads);
  setup.dense_device = device;
  const StepCost step = cost.Estimate(program, setup);
  return step.stages[step.stage_index[Stage::kDense]].seconds;
}

// A cache that `ember plan` wrote before nlohmann (tests/scheduler/testdata).
TEST(DenseCalibrationFileTest, AFileWrittenByTheOlderWriterLoadsWithItsPoints) {
  const ResourceGraph graph = test::Host(4, 1 << 30);
  const std::string path = std::string(EMBER_SCHEDULER_TESTDATA) + "/dense_calibration.json";
  Result<std::string> text = ReadFile(path);
  ASSERT_TRUE(text.ok()) << text.status();
  const std::string descriptor =
      "dlrm dense=13 slots=26 dim=16 tasks=1 bottom=32,16 top=32 optimizer=adam threads=1 "
      "batch=128";
  Result<DenseMeasurement> read = DenseCalibrationFromJson(*text, path, graph, descriptor);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(graph.DevicesOf(DeviceKind::kCpu, 0)[0], read->device);
  ASSERT_EQ(1u, read->points.size());
  EXPECT_EQ(1, read->points[0].threads);
  EXPECT_EQ(128, read->points[0].batch);
  EXPECT_EQ(0.000734, read->points[0].seconds);
}

TEST(DenseCalibrationFileTest, AMissingOrUnknownFieldIsAnErrorNamingIt) {
  const ResourceGraph graph = test::Host(4, 1 << 30);
  DenseMeasurement measurement;
  measurement.points = {{2, 256, 0.005}, {4, 256, 0.003}};
  Result<Json> json = ParseJsonText(DenseCalibrationToJson(graph, "mlp", measurement));
  ASSERT_TRUE(json.ok()) << json.status();
  const auto error = [&](const Json& edited) {
    return DenseCalibrationFromJson(edited.dump(2), "d.json", graph, "mlp").status().message();
  };
  Json edited = *json;
  edited["points"][1].erase("batch");
  EXPECT_EQ("d.json: field \"points[1].batch\" is missing", error(edited));
  edited = *json;
  edited["points"][0]["rounds"] = 2;
  EXPECT_EQ("d.json: field \"points[0].rounds\" is not a known field", error(edited));
  edited = *json;
  edited["points"][1]["seconds"] = 0;
  EXPECT_EQ("d.json: field \"points[1].seconds\" is 0; expected > 0", error(edited));
  edited = *json;
  edited.erase("host");
  EXPECT_EQ("d.json: field \"host\" is missing", error(edited));
}

TEST(DenseMeasurementCostTest, WithoutAMeasurementTheDenseStageIsTheRoofline) {
  const ResourceGraph graph = test::Host(4, int64_t{64} << 30);
  const Program program = test::MlpProgram(256);
  const CostModel cost(&graph);
  const double roofline = cost.DenseRooflineSeconds(program, 256, 0, 2);
  EXPECT_GT(roofline, 0);
  EXPECT_DOUBLE_EQ(roofline, DenseStage(cost, program, 256, 2));
  EXPECT_DOUBLE_EQ(roofline, cost.DenseStageSeconds(program, 256, 0, 2));
}

TEST(DenseMeasurementCostTest, AtAMeasuredPointTheDenseStageIsTheMeasuredTime) {
  const ResourceGraph graph = test::Host(4, int64_t{64} << 30);
  const Program program = test::MlpProgram(256);
  CostModel cost(&graph);
  cost.set_dense_measurement({0, {{2, 256, 0.0125}, {1, 256, 0.02}}});
  EXPECT_NEAR(0.0125, DenseStage(cost, program, 256, 2), 1e-12);
  EXPECT_NEAR(0.02, DenseStage(cost, program, 256, 1), 1e-12);
  // A refined factor still multiplies it.
  cost.Refine({1, 1, 1, 1, 1}, {1, 1, 1, 2, 1}, /*pipelined=*/false);
  EXPECT_NEAR(0.025, DenseStage(cost, program, 256, 2), 1e-12);
}

TEST(DenseMeasurementCostTest, OtherBatchesScaleTheRooflineByTheMeasuredFactor) {
  const ResourceGraph graph = test::Host(4, int64_t{64} << 30);
  const Program program = test::MlpProgram(256);
  CostModel cost(&graph);
  const double r256 = cost.DenseRooflineSeconds(program, 256, 0, 2);
  const double r1024 = cost.DenseRooflineSeconds(program, 1024, 0, 2);
  const double r640 = cost.DenseRooflineSeconds(program, 640, 0, 2);
  const double r4096 = cost.DenseRooflineSeconds(program, 4096, 0, 2);
  // Measured 1.5x the roofline at 256 and 1.2x at 1024.
  cost.set_dense_measurement({0, {{2, 1024, 1.2 * r1024}, {2, 256, 1.5 * r256}}});
  EXPECT_NEAR(1.5 * r256, cost.DenseStageSeconds(program, 256, 0, 2), 1e-12);
  EXPECT_NEAR(1.2 * r1024, cost.DenseStageSeconds(program, 1024, 0, 2), 1e-12);
  // Halfway between the batches, halfway between the factors; beyond the
  // largest, its factor.
  EXPECT_NEAR(1.35 * r640, cost.DenseStageSeconds(program, 640, 0, 2), 1e-12);
  EXPECT_NEAR(1.2 * r4096, cost.DenseStageSeconds(program, 4096, 0, 2), 1e-12);
  EXPECT_NEAR(1.5 * cost.DenseRooflineSeconds(program, 64, 0, 2),
              cost.DenseStageSeconds(program, 64, 0, 2), 1e-12);
}

TEST(DenseMeasurementCostTest, OtherThreadCountsInterpolateTheFactorBetweenMeasuredOnes) {
  const ResourceGraph graph = test::Host(8, int64_t{64} << 30);
  const Program program = test::MlpProgram(256);
  CostModel cost(&graph);
  const double r1 = cost.DenseRooflineSeconds(program, 256, 0, 1);
  const double r4 = cost.DenseRooflineSeconds(program, 256, 0, 4);
  cost.set_dense_measurement({0, {{1, 256, 1.1 * r1}, {4, 256, 1.7 * r4}}});
  // Threads 2: a third of the way from 1 to 4.
  EXPECT_NEAR(1.3 * cost.DenseRooflineSeconds(program, 256, 0, 2),
              cost.DenseStageSeconds(program, 256, 0, 2), 1e-12);
  EXPECT_NEAR(1.7 * cost.DenseRooflineSeconds(program, 256, 0, 8),
              cost.DenseStageSeconds(program, 256, 0, 8), 1e-12);
}

TEST(DenseMeasurementCostTest, AGpuOrAnotherDeviceKeepsTheRoofline) {
  const ResourceGraph graph = test::Host(4, int64_t{64} << 30, /*gpus=*/1, int64_t{16} << 30);
  const Program program = test::MlpProgram(256);
  CostModel cost(&graph);
  const int gpu = graph.DevicesOf(DeviceKind::kGpu)[0];
  const double gpu_roofline = cost.DenseRooflineSeconds(program, 256, gpu, 1);
  cost.set_dense_measurement({0, {{2, 256, 1.0}}});
  EXPECT_DOUBLE_EQ(gpu_roofline, DenseStage(cost, program, 256, 2, gpu));
  EXPECT_NEAR(1.0, DenseStage(cost, program, 256, 2), 1e-12);
  // A measurement of no device, or with no usable point, is not used.
  cost.set_dense_measurement({-1, {{2, 256, 1.0}}});
  EXPECT_DOUBLE_EQ(cost.DenseRooflineSeconds(program, 256, 0, 2),
                   DenseStage(cost, program, 256, 2));
  cost.set_dense_measurement({0, {{2, 256, 0.0}}});
  EXPECT_DOUBLE_EQ(cost.DenseRooflineSeconds(program, 256, 0, 2),
                   DenseStage(cost, program, 256, 2));
}

}  // namespace
}  // namespace ember::scheduler
