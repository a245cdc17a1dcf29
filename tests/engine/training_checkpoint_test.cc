#include "engine/training_checkpoint.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <string>
#include <vector>

#include "core/file.h"
#include "engine/trainer.h"
#include "io/batch_source.h"
#include "io/criteo.h"
#include "io/stream_reader.h"
#include "io/synthetic.h"
#include "tests/testing/forwarding_batch_source.h"
#include "tests/testing/temp_dir.h"

namespace ember::engine {
namespace {

// Sets `stop` when batch number `at` is read.
class StoppingSource : public test::ForwardingBatchSource {
 public:
  StoppingSource(io::BatchSource& inner, std::atomic<bool>* stop, int at)
      : test::ForwardingBatchSource(inner), stop_(stop), at_(at) {}
  Result<bool> Next(io::Batch* out) override {
    if (++reads_ == at_) stop_->store(true);
    return test::ForwardingBatchSource::Next(out);
  }

 private:
  std::atomic<bool>* stop_;
  const int at_;
  int reads_ = 0;
};

// Counts the batches read through it.
class CountingSource : public test::ForwardingBatchSource {
 public:
  using test::ForwardingBatchSource::ForwardingBatchSource;
  Result<bool> Next(io::Batch* out) override {
    Result<bool> more = test::ForwardingBatchSource::Next(out);
    if (more.ok() && *more) ++batches_;
    return more;
  }
  int batches() const { return batches_; }

 private:
  int batches_ = 0;
};

class TrainingCheckpointTest : public test::TempDirTest {
 protected:
  void SetUp() override {
    test::TempDirTest::SetUp();
    io::SyntheticOptions synthetic;
    synthetic.rows = 3000;
    synthetic.vocabulary = 60;  // Batches share rows: pipelined pulls wait.
    const std::string path = Path("data.tsv");
    ASSERT_TRUE(io::WriteSyntheticCriteo(path, synthetic).ok());
    auto data = io::ReadCriteoFiles({path}, io::CriteoReadOptions{});
    ASSERT_TRUE(data.ok()) << data.status();
    data_ = std::move(*data);
  }

  static TrainOptions SmallOptions() {
    TrainOptions options;
    options.model.params.Set("bottom_mlp", std::vector<int>{32, 16});
    options.model.top_mlp = {32, 16};
    options.batch_size = 128;
    options.epochs = 2;  // 48 steps; shuffled per epoch.
    options.threads = 2;
    options.show_progress = false;
    options.checkpoint.full_every = 2;  // Full and delta embedding snapshots.
    return options;
  }

  // The options of the source Fit(data_) trains on with `options`.
  static io::DatasetBatchSourceOptions SourceOptions(const TrainOptions& options) {
    io::DatasetBatchSourceOptions source;
    source.batch_size = options.batch_size;
    source.num_epochs = options.epochs;
    source.shuffle = options.shuffle;
    source.seed = options.seed;
    return source;
  }

  // Trains with `options` (restoring first when `restore`), then predicts
  // every example.
  std::vector<float> Train(const TrainOptions& options, bool restore, TrainReport* report,
                           int64_t* restored_step = nullptr, io::BatchSource* source = nullptr) {
    auto trainer = Trainer::Create(options, data_.num_dense(), data_.num_slots());
    EXPECT_TRUE(trainer.ok()) << trainer.status();
    if (!trainer.ok()) return {};
    if (restore) {
      auto step = (*trainer)->Restore();
      EXPECT_TRUE(step.ok()) << step.status();
      if (!step.ok()) return {};
      if (restored_step) *restored_step = *step;
    }
    auto fitted = source ? (*trainer)->Fit(*source) : (*trainer)->Fit(data_);
    EXPECT_TRUE(fitted.ok()) << fitted.status();
    if (!fitted.ok()) return {};
    if (report) *report = *fitted;
    auto predictions = (*trainer)->Predict(data_);
    EXPECT_TRUE(predictions.ok()) << predictions.status();
    return predictions.ok() ? *predictions : std::vector<float>{};
  }

  io::Dataset data_;
};

// Checkpoints on the way change nothing, and a job stopped after 21 steps
// (a max_steps limit, or a stop request as SIGINT makes) and resumed from its
// checkpoint ends with exactly the model of the uninterrupted job: in
// memory and with a disk tier, with TTL eviction, sequential and pipelined.
TEST_F(TrainingCheckpointTest, ResumedTrainingEqualsUninterruptedTrainingBitForBit) {
  struct Case {
    const char* name;
    bool pipeline;
    bool disk_tier;
    int64_t ttl;
    bool frequency_admission = false;
  };
  int tier = 0;
  for (const Case& c : {Case{"sequential", false, false, 0}, Case{"pipelined", true, false, 0},
                        Case{"pipelined, disk tier", true, true, 0},
                        Case{"sequential, disk tier, ttl", false, true, 8},
                        Case{"pipelined, ttl", true, false, 8},
                        Case{"sequential, frequency admission", false, false, 0, true}}) {
    SCOPED_TRACE(c.name);
    TrainOptions options = SmallOptions();
    options.pipeline.pipelined = c.pipeline;
    options.table.ttl_steps = c.ttl;
    if (c.frequency_admission) {
      // Keys need 3 pulls for a row: the counts of keys not yet admitted
      // must survive the restore.
      options.table.admission.kind = embedding::AdmissionOptions::Kind::kFrequency;
      options.table.admission.min_count = 3;
    }
    if (c.disk_tier) options.table.memory_budget_bytes = 64 << 10;
    auto fresh_tier = [&] {
      if (c.disk_tier) options.table.disk_path = Path("tier" + std::to_string(tier++));
    };
    fresh_tier();
    TrainReport report;
    const std::vector<float> reference = Train(options, false, &report);
    ASSERT_EQ(3000u, reference.size());
    ASSERT_EQ(48, report.steps);
    EXPECT_EQ(0, report.checkpoints_written);

    // Checkpoints every 5 steps: the same model, and a last checkpoint at 48.
    options.checkpoint.dir = Path(std::string("every5-") + c.name);
    options.checkpoint.every_steps = 5;
    fresh_tier();
    EXPECT_EQ(reference, Train(options, false, &report));
    EXPECT_EQ(10, report.checkpoints_written);  // 5, 10, ..., 45 and 48.
    EXPECT_EQ(48, report.last_checkpoint_step);

    // Stopped by max_steps after 21 steps, resumed without the limit.
    options.checkpoint.dir = Path(std::string("limit-") + c.name);
    options.max_steps = 21;
    fresh_tier();
    Train(options, false, &report);
    EXPECT_EQ(21, report.steps);
    EXPECT_EQ(21, report.last_checkpoint_step);
    options.max_steps = 0;
    fresh_tier();
    int64_t restored = -1;
    EXPECT_EQ(reference, Train(options, true, &report, &restored));
    EXPECT_EQ(21, restored);
    EXPECT_EQ(21, report.resumed_from_step);
    EXPECT_EQ(27, report.steps);

    // Stopped by a request (what SIGINT does) after the batches read by then.
    options.checkpoint.dir = Path(std::string("stop-") + c.name);
    fresh_tier();
    std::atomic<bool> stop{false};
    options.stop_requested = &stop;
    // Batches are read ahead of training: stop once 17 have been read.
    io::DatasetBatchSource inner(data_, SourceOptions(options));
    StoppingSource stopping(inner, &stop, 17);
    Train(options, false, &report, nullptr, &stopping);
    EXPECT_TRUE(report.interrupted);
    EXPECT_GE(report.steps, 16);
    EXPECT_LE(report.steps, 17);
    EXPECT_EQ(report.steps, report.last_checkpoint_step);
    stop = false;
    fresh_tier();
    EXPECT_EQ(reference, Train(options, true, &report, &restored));
    EXPECT_EQ(48 - restored, report.steps);
  }
}

TEST_F(TrainingCheckpointTest, RestoreRefusesMissingDamagedAndForeignCheckpoints) {
  TrainOptions options = SmallOptions();
  options.checkpoint.dir = Path("ckpt");
  options.max_steps = 6;
  {
    auto trainer = Trainer::Create(options, data_.num_dense(), data_.num_slots());
    ASSERT_TRUE(trainer.ok());
    EXPECT_EQ(StatusCode::kNotFound, (*trainer)->Restore().status().code());
    ASSERT_TRUE((*trainer)->Fit(data_).ok());
  }
  const std::string dense = Path("ckpt/dense-00000000000000000006.bin");
  ASSERT_TRUE(std::filesystem::exists(dense));
  {
    // Another model: InvalidArgument naming both.
    TrainOptions other = options;
    other.model.top_mlp = {32, 8};
    auto trainer = Trainer::Create(other, data_.num_dense(), data_.num_slots());
    ASSERT_TRUE(trainer.ok());
    const Status status = (*trainer)->Restore().status();
    EXPECT_EQ(StatusCode::kInvalidArgument, status.code()) << status;
    EXPECT_NE(std::string::npos, status.message().find("another model")) << status;
  }
  {
    // Without a checkpoint directory: FailedPrecondition.
    TrainOptions none = options;
    none.checkpoint.dir.clear();
    auto trainer = Trainer::Create(none, data_.num_dense(), data_.num_slots());
    ASSERT_TRUE(trainer.ok());
    EXPECT_EQ(StatusCode::kFailedPrecondition, (*trainer)->Restore().status().code());
  }
  // One flipped byte in the dense file: DataLoss naming it.
  {
    auto bytes = ReadFile(dense);
    ASSERT_TRUE(bytes.ok());
    std::string damaged = *bytes;
    damaged[damaged.size() / 2] ^= 0x10;
    std::ofstream(dense, std::ios::binary | std::ios::trunc) << damaged;
    auto trainer = Trainer::Create(options, data_.num_dense(), data_.num_slots());
    ASSERT_TRUE(trainer.ok());
    const Status status = (*trainer)->Restore().status();
    EXPECT_EQ(StatusCode::kDataLoss, status.code()) << status;
    EXPECT_NE(std::string::npos, status.message().find(dense)) << status;
    // A truncated one too.
    std::ofstream(dense, std::ios::binary | std::ios::trunc) << bytes->substr(0, 40);
    EXPECT_EQ(StatusCode::kDataLoss, (*trainer)->Restore().status().code());
    std::filesystem::remove(dense);
    EXPECT_EQ(StatusCode::kDataLoss, (*trainer)->Restore().status().code());
  }
}

// A damaged newest checkpoint (its dense file, or its embedding snapshot's
// manifest) gives way to the one before it, which resumes to the
// uninterrupted job's model; the damaged snapshot is set aside so that saves
// go on. When every checkpoint is damaged, the newest one's DataLoss.
TEST_F(TrainingCheckpointTest, ADamagedNewestCheckpointFallsBackToThePreviousOne) {
  TrainReport report;
  const std::vector<float> reference = Train(SmallOptions(), false, &report);
  ASSERT_EQ(48, report.steps);
  for (const char* damage : {"dense file", "snapshot manifest"}) {
    SCOPED_TRACE(damage);
    TrainOptions options = SmallOptions();
    options.checkpoint.dir = Path(std::string("ckpt-") + damage);
    options.checkpoint.every_steps = 5;
    options.max_steps = 22;  // Checkpoints of steps 5, 10, 15, 20 and 22.
    Train(options, false, &report);
    ASSERT_EQ(22, report.last_checkpoint_step);
    // Step 22's snapshot, full or delta as the cadence made it.
    std::string snapshot;
    for (const auto& entry :
         std::filesystem::directory_iterator(options.checkpoint.dir + "/embedding")) {
      const std::string name = entry.path().filename().string();
      if (name.ends_with("-00000000000000000022")) snapshot = name;
    }
    ASSERT_FALSE(snapshot.empty());
    const std::string target =
        std::string(damage) == "dense file"
            ? options.checkpoint.dir + "/dense-00000000000000000022.bin"
            : options.checkpoint.dir + "/embedding/" + snapshot + "/MANIFEST";
    auto bytes = ReadFile(target);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    std::string damaged = *bytes;
    if (std::string(damage) == "dense file") {
      damaged[damaged.size() / 3] ^= 0x04;
    } else {
      damaged = std::regex_replace(damaged, std::regex("\"table_step\": 21"),
                                   "\"table_step\": 22");
    }
    ASSERT_NE(damaged, *bytes);
    std::ofstream(target, std::ios::binary | std::ios::trunc) << damaged;

    options.max_steps = 0;
    int64_t restored = -1;
    EXPECT_EQ(reference, Train(options, true, &report, &restored));
    EXPECT_EQ(20, restored);
    EXPECT_EQ(28, report.steps);
    EXPECT_TRUE(std::filesystem::exists(options.checkpoint.dir + "/embedding/damaged-" + snapshot));
  }
  // Every checkpoint damaged: DataLoss, the newest one's.
  TrainOptions options = SmallOptions();
  options.checkpoint.dir = Path("all-damaged");
  options.checkpoint.every_steps = 5;
  options.max_steps = 10;
  Train(options, false, &report);
  for (const char* step : {"00000000000000000005", "00000000000000000010"}) {
    std::ofstream(options.checkpoint.dir + "/dense-" + step + ".bin", std::ios::trunc) << "x";
  }
  auto trainer = Trainer::Create(options, data_.num_dense(), data_.num_slots());
  ASSERT_TRUE(trainer.ok());
  const Status status = (*trainer)->Restore().status();
  EXPECT_EQ(StatusCode::kDataLoss, status.code()) << status;
  EXPECT_NE(std::string::npos, status.message().find("dense-00000000000000000010.bin")) << status;
}

// A crash between the dense file and the embedding snapshot leaves the
// previous checkpoint restorable; the next save removes the orphan file.
TEST_F(TrainingCheckpointTest, InterruptedSaveKeepsThePreviousCheckpoint) {
  embedding::EmbeddingTableOptions table_options;
  table_options.dim = 4;
  table_options.track_changes = true;
  auto table = embedding::NewEmbeddingTable(table_options);
  ASSERT_TRUE(table.ok());
  std::vector<float> rows(3 * 4);
  ASSERT_TRUE((*table)->Pull({1, 2, 3}, rows.data()).ok());
  Parameter weight;
  weight.value = Tensor::Empty({2, 3});
  weight.slot.second_moment = Tensor::Empty({2, 3});
  for (int i = 0; i < 6; ++i) {
    weight.value.data<float>()[i] = 0.5f * i;
    weight.slot.second_moment.data<float>()[i] = 1.0f + i;
  }
  int64_t optimizer_steps = 7;
  DenseState state;
  state.parameters = {&weight};
  state.descriptor = DenseStateDescriptor("test", "adagrad", state.parameters);
  state.optimizer_steps = &optimizer_steps;
  EXPECT_EQ("test adagrad 2x3", state.descriptor);

  TrainingCheckpointOptions options;
  options.dir = Path("ckpt");
  bool crash = false;
  options.after_dense_write = [&] {
    return crash ? Status::IOError("simulated crash") : Status::OK();
  };
  auto checkpointer = TrainingCheckpointer::Create(**table, options);
  ASSERT_TRUE(checkpointer.ok()) << checkpointer.status();
  ASSERT_TRUE((*checkpointer)->Save(10, state).ok());
  // The state moves on; the save of step 20 dies before its snapshot.
  weight.value.data<float>()[0] = 99.0f;
  optimizer_steps = 12;
  crash = true;
  EXPECT_EQ(StatusCode::kIOError, (*checkpointer)->Save(20, state).code());
  EXPECT_TRUE(std::filesystem::exists(Path("ckpt/dense-00000000000000000020.bin")));
  auto newest = (*checkpointer)->NewestStep();
  ASSERT_TRUE(newest.ok());
  EXPECT_EQ(10, *newest);
  auto restored = (*checkpointer)->Restore(state);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(10, *restored);
  EXPECT_EQ(0.0f, weight.value.data<float>()[0]);
  EXPECT_EQ(2.5f, weight.value.data<float>()[5]);
  EXPECT_EQ(6.0f, weight.slot.second_moment.data<float>()[5]);
  EXPECT_EQ(7, optimizer_steps);
  // A process killed while writing its dense file left the temporary file.
  const std::string killed_write = Path("ckpt/dense-00000000000000000025.bin.tmp.4242.0");
  std::ofstream(killed_write) << "half a dense file";
  // The next save commits and removes the orphan and the temporary file.
  crash = false;
  ASSERT_TRUE((*checkpointer)->Save(30, state).ok());
  EXPECT_FALSE(std::filesystem::exists(Path("ckpt/dense-00000000000000000020.bin")));
  EXPECT_FALSE(std::filesystem::exists(killed_write));
  EXPECT_TRUE(std::filesystem::exists(Path("ckpt/dense-00000000000000000030.bin")));
  // A table without change tracking cannot be checkpointed.
  table_options.track_changes = false;
  auto untracked = embedding::NewEmbeddingTable(table_options);
  ASSERT_TRUE(untracked.ok());
  EXPECT_EQ(StatusCode::kInvalidArgument,
            TrainingCheckpointer::Create(**untracked, options).status().code());
}

// A resumed job seeks its data to where the checkpoint's batches ended
// instead of reading them again: streamed from files (shuffled pieces and a
// shuffle buffer) and in memory, sequential and pipelined, with the model of
// the uninterrupted job bit for bit.
TEST_F(TrainingCheckpointTest, ResumeSeeksTheDataInsteadOfReadingTrainedBatchesAgain) {
  auto format = io::NewCriteoFormat();
  ASSERT_TRUE(format.ok()) << format.status();
  io::StreamReaderOptions stream;
  stream.batch_size = 128;
  stream.num_epochs = 2;
  stream.piece_bytes = 16 << 10;
  stream.shuffle_pieces = true;
  stream.shuffle_buffer = 300;
  stream.seed = 7;
  auto open_stream = [&]() -> std::unique_ptr<io::BatchSource> {
    auto reader = io::StreamReader::OpenText({Path("data.tsv")}, **format, stream);
    EXPECT_TRUE(reader.ok()) << reader.status();
    return reader.ok() ? std::move(*reader) : nullptr;
  };
  io::DatasetBatchSourceOptions memory;
  memory.batch_size = 128;
  memory.num_epochs = 2;
  memory.shuffle = true;
  memory.seed = 7;
  auto open_memory = [&]() -> std::unique_ptr<io::BatchSource> {
    return std::make_unique<io::DatasetBatchSource>(data_, memory);
  };
  int run = 0;
  for (const bool streamed : {true, false}) {
    for (const bool pipelined : {false, true}) {
      SCOPED_TRACE(std::string(streamed ? "streamed" : "in memory") +
                   (pipelined ? ", pipelined" : ", sequential"));
      const std::function<std::unique_ptr<io::BatchSource>()> open =
          streamed ? std::function<std::unique_ptr<io::BatchSource>()>(open_stream) : open_memory;
      TrainOptions options = SmallOptions();
      options.pipeline.pipelined = pipelined;
      std::unique_ptr<io::BatchSource> whole = open();
      ASSERT_NE(nullptr, whole);
      TrainReport report;
      const std::vector<float> reference = Train(options, false, &report, nullptr, whole.get());
      const int64_t total = report.steps;
      ASSERT_GT(total, 30);

      options.checkpoint.dir = Path("seek" + std::to_string(run++));
      options.checkpoint.every_steps = 7;
      options.max_steps = 23;
      std::unique_ptr<io::BatchSource> first = open();
      Train(options, false, &report, nullptr, first.get());
      ASSERT_EQ(23, report.last_checkpoint_step);

      options.max_steps = 0;
      std::unique_ptr<io::BatchSource> second = open();
      CountingSource counting(*second);
      int64_t restored = -1;
      EXPECT_EQ(reference, Train(options, true, &report, &restored, &counting));
      EXPECT_EQ(23, restored);
      EXPECT_EQ(total - 23, report.steps);
      // Only the batches after the checkpoint were read.
      EXPECT_EQ(total - 23, counting.batches());
    }
  }
}

// Sequential training reads a batch ahead (on a background thread while a
// step trains; with a disk tier also to prefetch its rows): a checkpoint
// taken between steps keeps the position from before that batch. A job that
// fails after its checkpoint of step 20 resumes from it reading only the
// batches after step 20, to the uninterrupted model.
TEST_F(TrainingCheckpointTest,
       APeriodicCheckpointOfTrainingThatReadsAheadResumesWhereItsDataEnded) {
  TrainOptions options = SmallOptions();
  options.pipeline.pipelined = false;
  options.table.memory_budget_bytes = 64 << 10;
  options.table.disk_path = Path("tier-reference");
  const io::DatasetBatchSourceOptions memory = SourceOptions(options);
  TrainReport report;
  const std::vector<float> reference = Train(options, false, &report);
  ASSERT_EQ(48, report.steps);

  // Reads 0..20 are steps 0..20 (read 20 ahead, during step 19); read 23
  // fails, after the checkpoint of step 20 and before any other.
  class FailingSource : public test::ForwardingBatchSource {
   public:
    using test::ForwardingBatchSource::ForwardingBatchSource;
    Result<bool> Next(io::Batch* out) override {
      if (reads_++ == 23) return Status::DataLoss("injected read failure");
      return test::ForwardingBatchSource::Next(out);
    }

   private:
    int reads_ = 0;
  };
  options.checkpoint.dir = Path("ahead");
  options.checkpoint.every_steps = 10;
  options.table.disk_path = Path("tier-first");
  io::DatasetBatchSource first_data(data_, memory);
  FailingSource failing(first_data);
  auto trainer = Trainer::Create(options, data_.num_dense(), data_.num_slots());
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  ASSERT_EQ(StatusCode::kDataLoss, (*trainer)->Fit(failing).status().code());
  trainer->reset();

  options.table.disk_path = Path("tier-second");
  io::DatasetBatchSource second_data(data_, memory);
  CountingSource counting(second_data);
  int64_t restored = -1;
  EXPECT_EQ(reference, Train(options, true, &report, &restored, &counting));
  EXPECT_EQ(20, restored);
  EXPECT_EQ(28, report.steps);
  EXPECT_EQ(28, counting.batches());
}

// A data position that cannot be taken for the batch read ahead is never
// replaced by an older one: the checkpoint due before that batch trains is
// not written, training stops with the error, and the job resumes from the
// checkpoint before it to the uninterrupted model.
TEST_F(TrainingCheckpointTest, APositionThatCannotBeTakenIsNotSavedStale) {
  TrainOptions options = SmallOptions();
  options.pipeline.pipelined = false;
  const io::DatasetBatchSourceOptions memory = SourceOptions(options);
  TrainReport report;
  const std::vector<float> reference = Train(options, false, &report);
  ASSERT_EQ(48, report.steps);

  // The position after 10 batches (taken while step 9 trains, before batch
  // 10 is read ahead) fails: the checkpoint of step 10 cannot be written.
  class FailingPosition : public test::ForwardingBatchSource {
   public:
    using test::ForwardingBatchSource::ForwardingBatchSource;
    Result<bool> Next(io::Batch* out) override {
      ++reads_;
      return test::ForwardingBatchSource::Next(out);
    }
    Result<std::string> ResumePosition() const override {
      if (reads_ == 10) return Status::IOError("injected position failure");
      return test::ForwardingBatchSource::ResumePosition();
    }

   private:
    int reads_ = 0;
  };
  options.checkpoint.dir = Path("position");
  options.checkpoint.every_steps = 5;
  io::DatasetBatchSource first_data(data_, memory);
  FailingPosition failing(first_data);
  auto trainer = Trainer::Create(options, data_.num_dense(), data_.num_slots());
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  const Result<TrainReport> failed = (*trainer)->Fit(failing);
  EXPECT_EQ(StatusCode::kIOError, failed.status().code()) << failed.status();
  auto newest = (*trainer)->NewestCheckpointStep();
  ASSERT_TRUE(newest.ok()) << newest.status();
  EXPECT_EQ(5, *newest);
  trainer->reset();

  int64_t restored = -1;
  EXPECT_EQ(reference, Train(options, true, &report, &restored));
  EXPECT_EQ(5, restored);
  EXPECT_EQ(43, report.steps);
}

// A checkpoint's data position belongs to its data: resuming on other data
// (here, batches of another size) is refused, naming what differs.
TEST_F(TrainingCheckpointTest, ResumeOnDataThePositionDoesNotFitIsRefused) {
  TrainOptions options = SmallOptions();
  options.checkpoint.dir = Path("ckpt");
  options.max_steps = 5;
  TrainReport report;
  Train(options, false, &report);
  ASSERT_EQ(5, report.last_checkpoint_step);

  TrainOptions resumed = SmallOptions();
  resumed.checkpoint.dir = options.checkpoint.dir;
  auto trainer = Trainer::Create(resumed, data_.num_dense(), data_.num_slots());
  ASSERT_TRUE(trainer.ok());
  ASSERT_TRUE((*trainer)->Restore().ok());
  io::DatasetBatchSourceOptions other;
  other.batch_size = 64;
  other.num_epochs = 2;
  io::DatasetBatchSource source(data_, other);
  Result<TrainReport> fitted = (*trainer)->Fit(source);
  ASSERT_FALSE(fitted.ok());
  EXPECT_EQ(StatusCode::kInvalidArgument, fitted.status().code());
  EXPECT_NE(std::string::npos, fitted.status().message().find("batches of 128, these are of 64"))
      << fitted.status();
  EXPECT_NE(std::string::npos, fitted.status().message().find("does not fit this training data"))
      << fitted.status();
}

}  // namespace
}  // namespace ember::engine
