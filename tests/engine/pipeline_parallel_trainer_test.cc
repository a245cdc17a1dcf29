// The dense model split over ranks (issue 32), ranks as threads over the
// in-process communicator: rank 0 trains with the table and the data, the
// others serve their chunks (engine/train_options.h pipeline_parallel). The
// trained model (dense weights, rows, predictions) equals, bit for bit, the
// same chunks run on one rank with the same micro-batches, and the unsplit
// model with gradient accumulation over them (DCN-v2's x0 passes through
// chunks and sums its gradient in the unsplit graph's order).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <ostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/in_process_communicator.h"
#include "engine/trainer.h"
#include "io/criteo.h"
#include "io/synthetic.h"
#include "tests/engine/pipeline_ranks.h"
#include "tests/testing/dense_reproducibility.h"
#include "tests/testing/forwarding_communicator.h"
#include "tests/testing/temp_dir.h"

namespace ember::engine {
namespace {

using Comms = std::vector<std::unique_ptr<Communicator>>;

struct Param {
  std::string model;
  std::string schedule;
  int ranks, virtual_stages, micro_batches;
  bool pipelined;  // The training loop's stage threads (TrainingLoopOptions).
};

void PrintTo(const Param& p, std::ostream* os) {
  *os << p.model << " " << p.schedule << " p=" << p.ranks << " v=" << p.virtual_stages
      << " m=" << p.micro_batches << (p.pipelined ? " pipelined" : " sequential");
}

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  const Param& p = info.param;
  return p.model + "_" + p.schedule + "_p" + std::to_string(p.ranks) + "v" +
         std::to_string(p.virtual_stages) + "m" + std::to_string(p.micro_batches) +
         (p.pipelined ? "_pipelined" : "_sequential");
}

// What a job trained: its dense parameters, rows and test predictions.
struct Trained {
  std::vector<std::vector<float>> parameters;
  std::map<uint64_t, std::vector<float>> rows;
  std::vector<float> predictions;
  int64_t steps = 0;
  double last_epoch_loss = 0;
};

Status Collect(Trainer& trainer, const TrainReport& report, const io::Dataset& test,
               Trained* out) {
  for (ops::Parameter* p : trainer.model().parameters()) {
    out->parameters.emplace_back(p->value.data<float>(),
                                 p->value.data<float>() + p->value.numel());
  }
  const int dim = trainer.table().dim();
  EMBER_RETURN_IF_ERROR(trainer.table().stored_rows().Scan([&](uint64_t key, const float* row) {
    out->rows[key] = std::vector<float>(row, row + dim);
    return Status::OK();
  }));
  EMBER_ASSIGN_OR_RETURN(out->predictions, trainer.Predict(test));
  out->steps = report.steps;
  out->last_epoch_loss = report.last_epoch_loss;
  return Status::OK();
}

class PipelineParallelTrainerTest : public test::TempDirTest,
                                    public ::testing::WithParamInterface<Param> {
 protected:
  static constexpr int kBatch = 96;

  void SetUp() override {
    test::TempDirTest::SetUp();
    train_ = Synthetic("train.tsv", kBatch * 6 + 37, 3);  // A short last batch.
    test_ = Synthetic("test.tsv", 300, 4);
  }

  io::Dataset Synthetic(const std::string& name, int64_t rows, uint64_t seed) {
    io::SyntheticOptions synthetic;
    synthetic.rows = rows;
    synthetic.seed = seed;
    const std::string path = Path(name);
    CHECK(io::WriteSyntheticCriteo(path, synthetic).ok());
    return *io::ReadCriteoFiles({path}, io::CriteoReadOptions{});
  }

  TrainOptions Options(int ranks, int virtual_stages, int micro_batches,
                       const std::string& schedule) const {
    TrainOptions options;
    options.model.name = GetParam().model;
    options.model.params.Set("bottom_mlp", std::vector<int>{32, 16});
    options.model.top_mlp = {48, 32, 16};
    options.model.params.Set("cross_layers", 4);
    options.table.dim = 16;
    options.batch_size = kBatch;
    options.epochs = 2;
    options.threads = 1;
    options.show_progress = false;
    options.pipeline.pipelined = GetParam().pipelined;
    options.pipeline_parallel.ranks = ranks;
    options.pipeline_parallel.virtual_stages = virtual_stages;
    options.pipeline_parallel.micro_batches = micro_batches;
    options.pipeline_parallel.schedule = schedule;
    return options;
  }

  // One process.
  Result<Trained> TrainAlone(const TrainOptions& options) {
    EMBER_ASSIGN_OR_RETURN(auto trainer,
                           Trainer::Create(options, train_.num_dense(), train_.num_slots()));
    EMBER_ASSIGN_OR_RETURN(const TrainReport report, trainer->Fit(train_));
    Trained trained;
    EMBER_RETURN_IF_ERROR(Collect(*trainer, report, test_, &trained));
    return trained;
  }

  // p ranks as threads; `options_of(r)` gives rank r's options.
  Result<Trained> TrainRanks(int p, const std::function<TrainOptions(int)>& options_of) {
    Comms stages = *NewInProcessCommunicators(p, {.timeout_seconds = 60});
    Comms commands = *NewInProcessCommunicators(p, {.timeout_seconds = 120});
    Trained trained;
    EMBER_RETURN_IF_ERROR(test::FirstFailure(test::RunPipelineRanks(
        stages, commands, options_of, train_.num_dense(), train_.num_slots(),
        [&](Trainer& trainer) -> Status {
          EMBER_ASSIGN_OR_RETURN(const TrainReport report, trainer.Fit(train_));
          // The parameters are rank 0's once Fit returns.
          return Collect(trainer, report, test_, &trained);
        })));
    return trained;
  }

  io::Dataset train_, test_;
};

// Max |a - b| over every value of two jobs; -1 when their shapes differ.
double MaxDifference(const Trained& a, const Trained& b);

// Two jobs trained the same bits; where this CPU's dense products depend on
// the rows of a call and the thread count (test::DenseRowsAreReproducible),
// values close after the job's 14 steps: Adagrad amplifies the last bit of a
// summed gradient early on (a row's first step is lr x g / |g|), so rows may
// move apart by up to ~1e-4 (measured 8.4e-5) while the loss stays put.
void ExpectSameTraining(const Trained& a, const Trained& b) {
  const double difference = MaxDifference(a, b);
  if (test::DenseRowsAreReproducible()) {
    EXPECT_EQ(0.0, difference);
    EXPECT_EQ(a.last_epoch_loss, b.last_epoch_loss);
  } else {
    EXPECT_GE(difference, 0.0) << "the jobs' shapes differ";
    EXPECT_LE(difference, 1e-3);
    EXPECT_NEAR(a.last_epoch_loss, b.last_epoch_loss, 1e-5);
  }
}

double MaxDifference(const Trained& a, const Trained& b) {
  if (a.parameters.size() != b.parameters.size() || a.rows.size() != b.rows.size() ||
      a.predictions.size() != b.predictions.size()) {
    return -1;
  }
  double most = 0;
  auto compare = [&](const std::vector<float>& x, const std::vector<float>& y) {
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      most = std::max(most, static_cast<double>(std::fabs(x[i] - y[i])));
    }
    return true;
  };
  for (size_t i = 0; i < a.parameters.size(); ++i) {
    if (!compare(a.parameters[i], b.parameters[i])) return -1;
  }
  for (const auto& [key, row] : a.rows) {
    const auto it = b.rows.find(key);
    if (it == b.rows.end() || !compare(row, it->second)) return -1;
  }
  if (!compare(a.predictions, b.predictions)) return -1;
  return most;
}

TEST_P(PipelineParallelTrainerTest, RanksTrainWhatOneRankTrainsWithTheSameMicroBatches) {
  const Param& param = GetParam();
  const int p = param.ranks, v = param.virtual_stages, m = param.micro_batches;
  Result<Trained> ranks =
      TrainRanks(p, [&](int) { return Options(p, v, m, param.schedule); });
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  EXPECT_EQ(14, ranks->steps);  // 2 epochs of 6 batches and a short one.

  // The same p·v chunks on one rank (the same partition: it balances the
  // same chunk count), the same micro-batches: the same bits.
  Result<Trained> same_chunks = TrainAlone(Options(1, p * v, m, "gpipe"));
  ASSERT_TRUE(same_chunks.ok()) << same_chunks.status();
  ExpectSameTraining(*ranks, *same_chunks);

  // The unsplit model, gradients accumulated over the same micro-batches.
  Result<Trained> unsplit = TrainAlone(Options(1, 1, m, ""));
  ASSERT_TRUE(unsplit.ok()) << unsplit.status();
  ExpectSameTraining(*ranks, *unsplit);

  // And it learned: the unsplit model without micro-batches is near it.
  Result<Trained> whole = TrainAlone(Options(1, 1, 1, ""));
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_NEAR(whole->last_epoch_loss, ranks->last_epoch_loss, 1e-3);
}

// Checkpoints and failures, on two ranks.
class PipelineParallelJobTest : public PipelineParallelTrainerTest {};

TEST_P(PipelineParallelJobTest, ACheckpointOfRanksResumesOnOneRankExactly) {
  const Param& param = GetParam();
  const int v = param.virtual_stages, m = param.micro_batches;
  Result<Trained> uninterrupted = TrainAlone(Options(1, 2 * v, m, "gpipe"));
  ASSERT_TRUE(uninterrupted.ok()) << uninterrupted.status();
  // Two ranks train 6 steps (a checkpoint at 4, and the last at 6); one
  // rank holding all their chunks resumes and finishes.
  auto with_checkpoints = [&](TrainOptions options, int64_t max_steps) {
    options.checkpoint.dir = Path("checkpoints");
    options.checkpoint.every_steps = 4;
    options.max_steps = max_steps;
    return options;
  };
  Result<Trained> first = TrainRanks(
      2, [&](int) { return with_checkpoints(Options(2, v, m, param.schedule), 6); });
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(6, first->steps);
  TrainOptions second = with_checkpoints(Options(1, 2 * v, m, "gpipe"), 0);
  auto trainer = Trainer::Create(second, train_.num_dense(), train_.num_slots());
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  Result<int64_t> restored = (*trainer)->Restore();
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(6, *restored);
  Result<TrainReport> rest = (*trainer)->Fit(train_);
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_EQ(8, rest->steps);
  Trained resumed;
  ASSERT_TRUE(Collect(**trainer, *rest, test_, &resumed).ok());
  EXPECT_EQ(0.0, MaxDifference(*uninterrupted, resumed));
}

TEST_P(PipelineParallelJobTest, ARankWithAnotherModelIsRefusedBeforeTraining) {
  const Param& param = GetParam();
  Result<Trained> trained = TrainRanks(2, [&](int r) {
    TrainOptions options = Options(2, param.virtual_stages, param.micro_batches, param.schedule);
    if (r == 1) options.model.top_mlp = {48, 24, 16};
    return options;
  });
  ASSERT_FALSE(trained.ok());
  EXPECT_NE(StatusCode::kDeadlineExceeded, trained.status().code()) << trained.status();
  EXPECT_NE(std::string::npos, trained.status().message().find("differs from rank 0's"))
      << trained.status();
}

// Fails its `fail_at`-th Send.
class FailingCommunicator final : public test::ForwardingCommunicator {
 public:
  FailingCommunicator(std::unique_ptr<Communicator> inner, int fail_at)
      : ForwardingCommunicator(std::move(inner)), fail_at_(fail_at) {}
  Status Send(ConstCommBuffer data, int dst, int tag) override {
    if (++sends_ == fail_at_) return Status::Internal("injected: the rank lost its device");
    return inner().Send(data, dst, tag);
  }

 private:
  int fail_at_;
  int sends_ = 0;
};

TEST_P(PipelineParallelJobTest, ARankThatFailsMidScheduleStopsEveryRankWithItsError) {
  const Param& param = GetParam();
  const int p = param.ranks;
  Comms stages = *NewInProcessCommunicators(p, {.timeout_seconds = 60});
  Comms commands = *NewInProcessCommunicators(p, {.timeout_seconds = 60});
  // The last rank fails its 7th send: in the second step (it sends a
  // gradient per micro-batch and the logits and loss each step).
  stages[p - 1] = std::make_unique<FailingCommunicator>(std::move(stages[p - 1]), 7);
  const std::vector<Status> statuses = test::RunPipelineRanks(
      stages, commands,
      [&](int) { return Options(p, param.virtual_stages, param.micro_batches, param.schedule); },
      train_.num_dense(), train_.num_slots(),
      [&](Trainer& trainer) { return trainer.Fit(train_).status(); });
  // Every rank stopped with the failure, none at a timeout.
  for (int r = 0; r < p; ++r) {
    ASSERT_FALSE(statuses[r].ok()) << "rank " << r;
    EXPECT_NE(StatusCode::kDeadlineExceeded, statuses[r].code()) << statuses[r];
    EXPECT_NE(std::string::npos, statuses[r].message().find("lost its device")) << statuses[r];
  }
  std::printf("rank 0's error: %s\n", statuses[0].ToString().c_str());
  EXPECT_NE(std::string::npos, statuses[0].message().find("rank " + std::to_string(p - 1)))
      << statuses[0];
}

INSTANTIATE_TEST_SUITE_P(Shapes, PipelineParallelTrainerTest,
                         ::testing::Values(Param{"dlrm", "1f1b", 2, 1, 4, false},
                                           Param{"dlrm", "interleaved", 2, 2, 4, true},
                                           Param{"dcn_v2", "gpipe", 3, 1, 3, false},
                                           Param{"dcn_v2", "interleaved", 2, 2, 2, true},
                                           Param{"dcn_v2", "1f1b", 2, 1, 5, true}),
                         ParamName);
INSTANTIATE_TEST_SUITE_P(TwoRanks, PipelineParallelJobTest,
                         ::testing::Values(Param{"dlrm", "1f1b", 2, 1, 4, false},
                                           Param{"dlrm", "interleaved", 2, 2, 4, true}),
                         ParamName);

}  // namespace
}  // namespace ember::engine
