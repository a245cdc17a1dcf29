// What Create and Fit refuse, when a run stops, and what its report measures.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "engine/trainer.h"
#include "io/batch_source.h"
#include "io/criteo.h"
#include "io/synthetic.h"
#include "tests/engine/trainer_test_util.h"
#include "tests/testing/forwarding_batch_source.h"

namespace ember::engine {
namespace {

using test::TrainerTest;

TEST(TrainOptionsTest, UnknownModelAndBadValuesAreInvalidArgument) {
  TrainOptions options;
  options.model.name = "resnet";
  EXPECT_EQ(StatusCode::kInvalidArgument, ValidateTrainOptions(options).code());
  options = TrainOptions();
  options.batch_size = 0;
  EXPECT_EQ(StatusCode::kInvalidArgument, ValidateTrainOptions(options).code());
  options = TrainOptions();
  options.dense_optimizer.learning_rate = -1;
  EXPECT_EQ(StatusCode::kInvalidArgument, ValidateTrainOptions(options).code());
  options = TrainOptions();
  options.timing_warmup_steps = -1;
  EXPECT_THAT(ValidateTrainOptions(options).message(),
              ::testing::HasSubstr("--timing_warmup_steps must be >= 0"));
  options = TrainOptions();
  options.embedding_reserve_rows = -2;
  EXPECT_THAT(ValidateTrainOptions(options).message(),
              ::testing::HasSubstr("--embedding_reserve_rows must be >= -1"));
  // The split of threads between stages: four counts within the job's.
  options = TrainOptions();
  options.threads = 2;
  options.pipeline.stage_threads = *pipeline::WorkerStageThreads({1, 1, 2, 1});
  EXPECT_TRUE(ValidateTrainOptions(options).ok());
  EXPECT_THAT(pipeline::WorkerStageThreads({1, 1, 2}).status().message(),
              ::testing::HasSubstr("--stage_threads needs 4 counts"));
  for (const std::vector<int>& split : std::vector<std::vector<int>>{{1, 0, 2, 1}, {1, 1, 3, 1}}) {
    options.pipeline.stage_threads = *pipeline::WorkerStageThreads(split);
    const Status status = ValidateTrainOptions(options);
    EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
    EXPECT_THAT(status.message(), ::testing::HasSubstr("--stage_threads"));
  }
  options.pipeline.stage_threads = *pipeline::WorkerStageThreads({1, 1, 3, 1});
  EXPECT_THAT(ValidateTrainOptions(options).message(), ::testing::HasSubstr("dense stage's 3"));
}

TEST(TrainerCreateTest, EmptyTrainingDataIsInvalidArgument) {
  TrainOptions options;
  options.show_progress = false;
  auto trainer = Trainer::Create(options, 13, 26);
  ASSERT_TRUE(trainer.ok());
  EXPECT_EQ(StatusCode::kInvalidArgument, (*trainer)->Fit(io::Dataset()).status().code());
}

// f16 arithmetic is for a GPU dense step: on the CPU it is refused.
TEST(TrainerCreateTest, F16DenseArithmeticOnTheCpuIsInvalidArgument) {
  TrainOptions options;
  options.show_progress = false;
  options.model.precision = ops::ComputePrecision::kF16;
  auto trainer = Trainer::Create(options, 13, 26);
  EXPECT_EQ(StatusCode::kInvalidArgument, trainer.status().code()) << trainer.status();
  EXPECT_THAT(trainer.status().message(),
              ::testing::HasSubstr("the dense model on cpu: f16 arithmetic needs a CUDA device"));
}

// A dense step on a CUDA device the build or the host does not have is a
// clear error naming the device (tests/gpu/trainer_cuda_test.cc trains on
// one).
TEST(TrainerCreateTest, ADenseDeviceThatIsNotThereIsFailedPrecondition) {
  TrainOptions options;
  options.show_progress = false;
  options.model.device = Device::Cuda(CudaDeviceCount());
  auto trainer = Trainer::Create(options, 13, 26);
  EXPECT_EQ(StatusCode::kFailedPrecondition, trainer.status().code()) << trainer.status();
  EXPECT_THAT(trainer.status().message(),
              ::testing::HasSubstr("the dense model on cuda:" + std::to_string(CudaDeviceCount())));
}

TEST_F(TrainerTest, SourceOfAnotherShapeIsInvalidArgument) {
  auto data = SyntheticData(100);
  ASSERT_TRUE(data.ok());
  auto trainer = Trainer::Create(SmallOptions(), /*num_dense=*/4, data->num_slots());
  ASSERT_TRUE(trainer.ok());
  io::DatasetBatchSource source(*data, {});
  auto report = (*trainer)->Fit(source);
  EXPECT_EQ(StatusCode::kInvalidArgument, report.status().code());
  EXPECT_NE(std::string::npos, report.status().message().find("13 dense features"))
      << report.status();
}

TEST_F(TrainerTest, MaxStepsStopsTraining) {
  auto data = SyntheticData(5000);
  ASSERT_TRUE(data.ok());
  TrainOptions options = SmallOptions();
  options.max_steps = 3;
  options.epochs = 5;
  auto trainer = Trainer::Create(options, data->num_dense(), data->num_slots());
  ASSERT_TRUE(trainer.ok());
  auto report = (*trainer)->Fit(*data);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(3, report->steps);
  EXPECT_EQ(3 * 256, report->examples);
  // The pipelined trainer (the default) times reading as a stage too.
  for (pipeline::Stage s : pipeline::kAllStages) {
    EXPECT_GT(report->stage_times.busy_seconds[s], 0.0) << pipeline::StageName(s);
  }
}

// Batches of 100 examples over 100 epochs of `data`, with `on_read` run
// before read number `read` (from 0; -1: none) and its error returned.
class HookedSource : public test::ForwardingBatchSource {
 public:
  HookedSource(const io::Dataset& data, int64_t read, std::function<Status()> on_read)
      : test::ForwardingBatchSource(inner_),
        inner_(data, Options()),
        read_(read),
        on_read_(std::move(on_read)) {}
  static io::DatasetBatchSourceOptions Options() {
    io::DatasetBatchSourceOptions o;
    o.batch_size = 100;
    o.num_epochs = 100;
    return o;
  }
  Result<bool> Next(io::Batch* batch) override {
    if (served_++ == read_) EMBER_RETURN_IF_ERROR(on_read_());
    return test::ForwardingBatchSource::Next(batch);
  }

 private:
  io::DatasetBatchSource inner_;
  int64_t read_;
  std::function<Status()> on_read_;
  int64_t served_ = 0;
};

// A source that fails while training runs (pipelined, or sequential with or
// without reading ahead): Fit returns its error with context, promptly, and
// a stop request ends training after the batches already read.
TEST_F(TrainerTest, ReadFailureStopsTrainingWithTheError) {
  auto data = SyntheticData(2000);
  ASSERT_TRUE(data.ok());
  // Pipelined, and sequential reading ahead or between steps.
  for (const auto& [pipeline, read_ahead] :
       {std::pair{true, true}, std::pair{false, true}, std::pair{false, false}}) {
    SCOPED_TRACE(std::string(pipeline ? "pipelined" : "sequential") +
                 (read_ahead ? "" : ", read between steps"));
    TrainOptions options = SmallOptions();
    options.pipeline.pipelined = pipeline;
    options.pipeline.read_ahead = read_ahead;
    auto trainer = Trainer::Create(options, data->num_dense(), data->num_slots());
    ASSERT_TRUE(trainer.ok());
    HookedSource source(*data, 30, [] { return Status::DataLoss("injected read failure"); });
    auto report = (*trainer)->Fit(source);
    EXPECT_EQ(StatusCode::kDataLoss, report.status().code());
    EXPECT_NE(std::string::npos, report.status().message().find("reading the training data"))
        << report.status();
  }

  std::atomic<bool> stop{true};
  TrainOptions options = SmallOptions();
  options.stop_requested = &stop;
  auto stopped = Trainer::Create(options, data->num_dense(), data->num_slots());
  ASSERT_TRUE(stopped.ok());
  HookedSource endless(*data, -1, nullptr);
  auto interrupted = (*stopped)->Fit(endless);
  ASSERT_TRUE(interrupted.ok()) << interrupted.status();
  EXPECT_TRUE(interrupted->interrupted);
  EXPECT_EQ(0, interrupted->steps);
}

// A checkpoint of a job that had finished: a Fit with nothing left to train
// says so, with no step trained and no evaluation.
TEST_F(TrainerTest, FittingAFinishedJobAgainReportsItFinished) {
  auto data = SyntheticData(1000);
  ASSERT_TRUE(data.ok()) << data.status();
  TrainOptions options = SmallOptions();
  options.checkpoint.dir = (dir_ / "ck").string();
  {
    auto trainer = Trainer::Create(options, data->num_dense(), data->num_slots());
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    auto report = (*trainer)->Fit(*data);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_FALSE(report->already_finished);
  }
  int calls = 0;
  options.evaluate = [&]() -> Result<Metrics> {
    ++calls;
    return Metrics();
  };
  auto trainer = Trainer::Create(options, data->num_dense(), data->num_slots());
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  ASSERT_TRUE((*trainer)->Restore().ok());
  auto report = (*trainer)->Fit(*data);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->already_finished);
  EXPECT_EQ(0, report->steps);
  EXPECT_EQ(0, calls);
}

// With max_staleness 2 pulls may miss up to two pushes: the report counts
// how stale each pulled row was, and some rows were pulled stale (every
// batch shares most of 60 keys, and the next batch's pull runs while this
// one's dense step does), never more than 2 steps, and the model still
// learns; with max_staleness 0 every row is fresh.
TEST_F(TrainerTest, BoundedStalenessIsMeasuredAndRespected) {
  io::SyntheticOptions synthetic;
  synthetic.rows = 6000;
  synthetic.vocabulary = 60;
  auto data = SyntheticData(synthetic);
  ASSERT_TRUE(data.ok());
  for (const int max_staleness : {2, 0}) {
    SCOPED_TRACE("max_staleness " + std::to_string(max_staleness));
    TrainOptions options = SmallOptions();
    options.batch_size = 128;
    options.pipeline.max_staleness = max_staleness;
    options.pipeline.depth = 6;
    auto trainer = Trainer::Create(options, data->num_dense(), data->num_slots());
    ASSERT_TRUE(trainer.ok());
    auto report = (*trainer)->Fit(*data);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_TRUE(report->pipelined);
    const pipeline::StalenessHistogram& h = report->staleness;
    ASSERT_GE(h.rows.size(), 1u);
    EXPECT_LE(h.rows.size(), static_cast<size_t>(max_staleness) + 1) << h.ToString();
    EXPECT_GT(h.total(), 0);
    // Each step pulls at most batch x slots rows; the sum is the unique keys
    // pulled over all steps.
    EXPECT_LE(h.total(), report->steps * 128 * 26);
    int64_t stale = 0;
    for (size_t s = 1; s < h.rows.size(); ++s) stale += h.rows[s];
    if (max_staleness > 0) {
      EXPECT_GT(stale, 0) << "no row was pulled stale: " << h.ToString();
    } else {
      EXPECT_EQ(stale, 0) << h.ToString();
    }
    auto metrics = (*trainer)->Evaluate(*data);
    ASSERT_TRUE(metrics.ok());
    EXPECT_GT(metrics->auc, 0.65);
  }
}

// The steady-state rate leaves out the warm-up steps and only them, pipelined
// or not: a slow first read is outside its span with one warm-up step and
// inside it with none, a slow second read is inside it with one; a Fit of no
// more steps than the warm-up has none.
TEST_F(TrainerTest, SteadyRateLeavesOutTheWarmUpSteps) {
  auto data = SyntheticData(2000);
  ASSERT_TRUE(data.ok()) << data.status();
  constexpr double kDelay = 0.5;
  struct Case {
    int64_t slow_read;
    int64_t warmup_steps;
    bool delay_in_span;
  };
  for (const bool pipeline : {false, true}) {
    for (const Case& c : {Case{0, 1, false}, Case{0, 0, true}, Case{1, 1, true}}) {
      SCOPED_TRACE(std::string(pipeline ? "pipelined" : "sequential") + ", slow read " +
                   std::to_string(c.slow_read) + ", warm-up steps " +
                   std::to_string(c.warmup_steps));
      TrainOptions options = SmallOptions();
      options.pipeline.pipelined = pipeline;
      options.max_steps = 20;
      options.timing_warmup_steps = c.warmup_steps;
      auto trainer = Trainer::Create(options, data->num_dense(), data->num_slots());
      ASSERT_TRUE(trainer.ok()) << trainer.status();
      HookedSource source(*data, c.slow_read, [] {
        usleep(static_cast<useconds_t>(kDelay * 1e6));
        return Status::OK();
      });
      const auto start = std::chrono::steady_clock::now();
      auto report = (*trainer)->Fit(source);
      const double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      ASSERT_TRUE(report.ok()) << report.status();
      ASSERT_EQ(20, report->steps);
      ASSERT_GT(report->steady_samples_per_sec, 0.0);
      // The span the rate is over, from the examples after the warm-up (100
      // per step): it holds the slow read, or leaves it out of the run's wall
      // time (whatever the machine's speed: a sanitizer's build is slow).
      const double span =
          (report->examples - 100 * c.warmup_steps) / report->steady_samples_per_sec;
      if (c.delay_in_span) {
        EXPECT_GE(span, kDelay);
      } else {
        EXPECT_LT(span, wall - 0.9 * kDelay);
      }
    }
  }
  TrainOptions options = SmallOptions();
  options.max_steps = 3;
  options.timing_warmup_steps = 3;
  auto trainer = Trainer::Create(options, data->num_dense(), data->num_slots());
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  auto report = (*trainer)->Fit(*data);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(3, report->steps);
  EXPECT_EQ(0.0, report->steady_samples_per_sec);
}

}  // namespace
}  // namespace ember::engine
