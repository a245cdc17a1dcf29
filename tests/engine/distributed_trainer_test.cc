// Several ranks training one model (issue 31), ranks as threads over the
// in-process communicator: N ranks with batch B train the model one rank
// trains with batch N x B whose batches are the ranks' in rank order
// (engine/train_options.h RankGroup, pipeline/training_step.h for where the
// bits can differ), sequential and pipelined, in memory and with a disk tier
// on every rank.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/in_process_communicator.h"
#include "core/random.h"
#include "embedding/sharded_table.h"
#include "embedding/stored_rows.h"
#include "core/file.h"
#include "engine/rank_checkpoint.h"
#include "engine/trainer.h"
#include "io/criteo.h"
#include "io/synthetic.h"
#include "tests/testing/dense_reproducibility.h"
#include "tests/testing/temp_dir.h"

namespace ember::engine {
namespace {

using Comms = std::vector<std::unique_ptr<Communicator>>;

struct Param {
  int ranks;
  bool pipelined;
  bool disk_tier;
  // Data on which the sums can run in the same order (see BitwiseData).
  bool bitwise = false;
  // "moe": the mixture of experts, its experts divided among the ranks
  // (ops/expert_parallel.h); the reference routes each rank's rows as a
  // group of its own (its row ranges), as the ranks do.
  std::string model = "dlrm";
  // false: every rank computes every expert for its own rows.
  bool expert_parallel = true;
  // > 1: each rank runs its batch in this many micro-batches, their
  // gradients summed over the ranks before each step (gradient accumulation
  // under data parallelism); the reference runs ranks x as many, each of a
  // rank's rows (the sums then differ in order alone).
  int micro_batches = 1;
};

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  return std::to_string(info.param.ranks) + "Ranks" +
         (info.param.pipelined ? "Pipelined" : "Sequential") +
         (info.param.disk_tier ? "Tiered" : "InMemory") + (info.param.bitwise ? "Bitwise" : "") +
         (info.param.model != "moe"      ? ""
          : info.param.expert_parallel ? "ExpertParallelMoe"
                                       : "DataParallelMoe") +
         (info.param.micro_batches > 1
              ? std::to_string(info.param.micro_batches) + "MicroBatches"
              : "");
}

// `data` with the keys of every rank but the first made distinct within
// its part of each global batch of `ranks` x `batch` examples (in order, no
// shuffle), and repeated from one global batch to the next: a key's row
// gradient is then summed in the same order by one rank and by the ranks
// (pipeline/training_step.h), and the results are the same bits.
io::Dataset BitwiseData(const io::Dataset& data, int ranks, int batch) {
  io::Batch all = data.all();
  const int64_t global = int64_t{ranks} * batch;
  for (int64_t i = 0; i < all.size; ++i) {
    const int64_t row = i % global;
    if (row < batch) continue;  // The first rank's keys may repeat.
    for (int s = 0; s < all.num_slots; ++s) {
      for (int64_t k = all.offsets[i * all.num_slots + s]; k < all.offsets[i * all.num_slots + s + 1];
           ++k) {
        all.keys[k] = HashCombine(HashCombine(row, s), k - all.offsets[i * all.num_slots + s]);
      }
    }
  }
  return io::Dataset(std::move(all));
}

// Every stored row's weights, by key.
void CollectRows(embedding::EmbeddingTable& table, std::map<uint64_t, std::vector<float>>* rows) {
  const int dim = table.dim();
  ASSERT_TRUE(table.stored_rows()
                  .Scan([&](uint64_t key, const float* row) {
                    EXPECT_TRUE(rows->emplace(key, std::vector<float>(row, row + dim)).second)
                        << "key " << key << " on two ranks";
                    return Status::OK();
                  })
                  .ok());
}

class DistributedTrainerTest : public test::TempDirTest,
                               public ::testing::WithParamInterface<Param> {
 protected:
  static constexpr int kBatch = 64;  // Per rank.

  Result<io::Dataset> SyntheticData(const std::string& name, int64_t rows, uint64_t seed) {
    io::SyntheticOptions synthetic;
    synthetic.rows = rows;
    synthetic.seed = seed;
    const std::string path = Path(name);
    EMBER_RETURN_IF_ERROR(io::WriteSyntheticCriteo(path, synthetic).status());
    return io::ReadCriteoFiles({path}, io::CriteoReadOptions{});
  }

  TrainOptions Options(const std::string& disk_name) {
    TrainOptions options;
    options.model.name = GetParam().model;
    options.model.params.Set("bottom_mlp", std::vector<int>{32, 16});
    options.model.top_mlp = {32, 16};
    options.model.params.Set("num_experts", GetParam().ranks == 3 ? 6 : 4);  // Divided among the ranks.
    options.table.dim = 16;
    options.epochs = 2;
    options.show_progress = false;
    options.pipeline.pipelined = GetParam().pipelined;
    if (GetParam().disk_tier) {
      options.table.memory_budget_bytes = 256 << 10;
      options.table.disk_path = Path(disk_name);
    }
    return options;
  }
};

TEST_P(DistributedTrainerTest, RanksTrainTheModelOneRankTrainsOnTheirBatchesTogether) {
  const int ranks = GetParam().ranks;
  const bool bitwise = GetParam().bitwise;
  // Seven global batches, and a short one unless bitwise (whose rows do not
  // split into ranges of the same sizes as the ranks' batches).
  auto train = SyntheticData("train.tsv", int64_t{ranks} * kBatch * 7 + (bitwise ? 0 : 40), 3);
  auto test = SyntheticData("test.tsv", 500, 4);
  ASSERT_TRUE(train.ok() && test.ok());
  if (bitwise) *train = BitwiseData(*train, ranks, kBatch);

  // One rank, batch ranks x kBatch, one row range of kBatch rows per thread
  // (as each rank runs its batch: see pipeline/training_step.h).
  TrainOptions alone = Options("alone");
  alone.batch_size = ranks * kBatch;
  alone.threads = ranks;
  alone.shuffle = !bitwise;
  if (GetParam().micro_batches > 1) {
    alone.pipeline_parallel.micro_batches = ranks * GetParam().micro_batches;
  }
  auto reference = Trainer::Create(alone, train->num_dense(), train->num_slots());
  ASSERT_TRUE(reference.ok()) << reference.status();
  auto reference_report = (*reference)->Fit(*train);
  ASSERT_TRUE(reference_report.ok()) << reference_report.status();
  auto expected = (*reference)->Predict(*test);
  ASSERT_TRUE(expected.ok());

  Comms groups[4];
  for (Comms& group : groups) {
    auto made = NewInProcessCommunicators(ranks, {.timeout_seconds = 60});
    ASSERT_TRUE(made.ok()) << made.status();
    group = std::move(*made);
  }
  std::vector<std::unique_ptr<Trainer>> trainers(ranks);
  std::vector<Result<TrainReport>> reports(ranks, Status::Internal("not run"));
  std::vector<Result<std::vector<float>>> predictions(ranks, Status::Internal("not run"));
  std::vector<double> aucs(ranks, -1);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      TrainOptions options = Options("rank-" + std::to_string(r));
      options.batch_size = kBatch;
      options.threads = 1;
      options.shuffle = !bitwise;
      options.expert_parallel = GetParam().expert_parallel;
      options.pipeline_parallel.micro_batches = GetParam().micro_batches;
      options.ranks = {groups[0][r].get(), groups[1][r].get(), groups[2][r].get(),
                       groups[3][r].get()};
      auto trainer = Trainer::Create(options, train->num_dense(), train->num_slots());
      if (!trainer.ok()) {
        reports[r] = trainer.status();
        for (Comms& group : groups) group[r]->Abort(trainer.status());
        return;
      }
      trainers[r] = std::move(*trainer);
      reports[r] = trainers[r]->Fit(*train);
      if (reports[r].ok()) predictions[r] = trainers[r]->Predict(*test);
      if (predictions[r].ok()) {
        auto metrics = trainers[r]->Evaluate(*test);
        aucs[r] = metrics.ok() ? metrics->auc : -1;
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < ranks; ++r) {
    ASSERT_TRUE(reports[r].ok()) << "rank " << r << ": " << reports[r].status();
    ASSERT_TRUE(predictions[r].ok()) << "rank " << r << ": " << predictions[r].status();
    EXPECT_EQ(reports[r]->steps, reference_report->steps) << "rank " << r;
    if (GetParam().model == "moe") {
      // The experts were divided: rows crossed between ranks (none with one).
      const bool divided = GetParam().expert_parallel;
      EXPECT_EQ(divided, trainers[r]->model().expert_parallel()) << "rank " << r;
      EXPECT_EQ(divided && ranks > 1, reports[r]->moe_exchanged_bytes > 0) << "rank " << r;
      EXPECT_GT(reports[r]->moe_choices, 0) << "rank " << r;
    }
  }

  // Every rank holds the same dense model.
  for (int r = 1; r < ranks; ++r) {
    auto a = trainers[0]->model().parameters(), b = trainers[r]->model().parameters();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(0, std::memcmp(a[i]->value.raw_data(), b[i]->value.raw_data(),
                               a[i]->value.numel() * sizeof(float)))
          << "parameter " << i << " of rank " << r;
    }
  }
  // The ranks' rows are the reference's rows, each on its owner.
  std::map<uint64_t, std::vector<float>> want, got;
  CollectRows((*reference)->table(), &want);
  for (int r = 0; r < ranks; ++r) CollectRows(trainers[r]->table(), &got);
  ASSERT_EQ(want.size(), got.size());
  double row_diff = 0.0;
  for (auto& [key, row] : want) {
    const auto& other = got[key];
    for (size_t d = 0; d < row.size(); ++d) {
      row_diff = std::max(row_diff, static_cast<double>(std::abs(row[d] - other[d])));
    }
  }
  double dense_diff = 0.0;
  auto a = (*reference)->model().parameters(), b = trainers[0]->model().parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    for (int64_t j = 0; j < a[i]->value.numel(); ++j) {
      dense_diff = std::max(dense_diff, static_cast<double>(std::abs(a[i]->value.data<float>()[j] -
                                                                     b[i]->value.data<float>()[j])));
    }
  }
  // An inference scores each example alone (a MoE model too: no capacity),
  // so the reference's thread count does not matter beyond the last bits of
  // a MoE model's per-expert products, which gather different rows.
  const bool moe = GetParam().model == "moe";
  double prediction_diff = 0.0;
  for (int r = 0; r < ranks; ++r) {
    ASSERT_EQ(expected->size(), predictions[r]->size());
    for (size_t i = 0; i < expected->size(); ++i) {
      prediction_diff = std::max(prediction_diff,
                                 static_cast<double>(std::abs((*expected)[i] - (*predictions[r])[i])));
    }
  }
  auto metrics = (*reference)->Evaluate(*test);
  ASSERT_TRUE(metrics.ok());
  const double reference_auc = metrics->auc;
  std::printf("%d ranks vs one: max |difference| rows %.3g, dense %.3g, predictions %.3g; "
              "test AUC %.6f vs %.6f\n",
              ranks, row_diff, dense_diff, prediction_diff, aucs[0], reference_auc);
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(aucs[r], aucs[0]) << "rank " << r;
  // Bitwise needs dense products whose rows do not depend on the thread
  // count and the other rows of a call (tests/testing/dense_reproducibility.h);
  // elsewhere the tolerances below hold.
  if (bitwise && test::DenseRowsAreReproducible()) {
    EXPECT_EQ(row_diff, 0.0);
    EXPECT_EQ(dense_diff, 0.0);
    if (moe) {
      EXPECT_LE(prediction_diff, 1e-6);
      EXPECT_NEAR(aucs[0], reference_auc, 1e-5);
    } else {
      EXPECT_EQ(prediction_diff, 0.0);
      EXPECT_EQ(aucs[0], reference_auc);
    }
  } else {
    // Rows trained with Adagrad amplify the last bit of a summed gradient
    // early on (a step is lr x g / |g| at first); the model's predictions
    // and its AUC stay put.
    EXPECT_LE(row_diff, 1e-3);
    EXPECT_LE(dense_diff, 1e-6);
    EXPECT_LE(prediction_diff, 5e-6);
    EXPECT_NEAR(aucs[0], reference_auc, 5e-5);
  }
}

// Every stored row (weights, optimizer state, metadata) of every rank, by key.
std::map<uint64_t, std::vector<float>> AllRows(std::vector<std::unique_ptr<Trainer>>& trainers) {
  std::map<uint64_t, std::vector<float>> rows;
  for (auto& trainer : trainers) {
    embedding::StoredRows& stored = trainer->table().stored_rows();
    const int64_t floats = stored.row_floats();
    EXPECT_TRUE(stored
                    .Scan([&](uint64_t key, const float* row) {
                      EXPECT_TRUE(rows.emplace(key, std::vector<float>(row, row + floats)).second)
                          << "key " << key << " on two ranks";
                      return Status::OK();
                    })
                    .ok());
  }
  return rows;
}

// "" when `a` and `b` hold the same rows, bit for bit; otherwise what differs.
std::string RowDifference(const std::map<uint64_t, std::vector<float>>& a,
                          const std::map<uint64_t, std::vector<float>>& b) {
  if (a.size() != b.size()) {
    return std::to_string(a.size()) + " rows against " + std::to_string(b.size());
  }
  int64_t differ = 0;
  std::string first;
  for (const auto& [key, row] : a) {
    auto it = b.find(key);
    if (it == b.end() || std::memcmp(row.data(), it->second.data(), row.size() * 4) != 0 ||
        row.size() != it->second.size()) {
      if (differ++ == 0) {
        first = "key " + std::to_string(key);
        if (it != b.end()) {
          for (size_t i = 0; i < row.size(); ++i) {
            if (std::memcmp(&row[i], &it->second[i], 4) != 0) {
              first += " float " + std::to_string(i) + ": " + std::to_string(row[i]) + " vs " +
                       std::to_string(it->second[i]);
              break;
            }
          }
        }
      }
    }
  }
  return differ == 0 ? "" : std::to_string(differ) + " rows differ, first " + first;
}

class RankCheckpointTest : public test::TempDirTest {
 protected:
  // `ranks` trainers on the job's checkpoint directory, each restored when
  // `restore`, then fitted on `train` up to max_steps (when > 0), ranks as
  // threads.
  std::vector<std::unique_ptr<Trainer>> Run(int ranks, const io::Dataset& train, bool restore,
                                            int64_t max_steps) {
    std::vector<Comms> groups(4);
    for (Comms& group : groups) {
      auto made = NewInProcessCommunicators(ranks, {.timeout_seconds = 60});
      EXPECT_TRUE(made.ok());
      group = std::move(*made);
    }
    std::vector<std::unique_ptr<Trainer>> trainers(ranks);
    std::vector<Status> status(ranks);
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r) {
      threads.emplace_back([&, r] {
        TrainOptions options;
        options.model.params.Set("bottom_mlp", std::vector<int>{16});
        options.model.top_mlp = {16};
        options.table.dim = 8;
        options.batch_size = 32;
        options.threads = 1;
        options.show_progress = false;
        options.max_steps = max_steps;
        options.checkpoint.dir = Path("ckpt");
        options.ranks = {groups[0][r].get(), groups[1][r].get(), groups[2][r].get(),
                         groups[3][r].get()};
        auto trainer = Trainer::Create(options, train.num_dense(), train.num_slots());
        status[r] = trainer.status();
        if (trainer.ok()) {
          trainers[r] = std::move(*trainer);
          if (restore) status[r] = trainers[r]->Restore().status();
          if (status[r].ok() && max_steps > 0) status[r] = trainers[r]->Fit(train).status();
        }
        if (!status[r].ok()) {
          for (Comms& group : groups) group[r]->Abort(status[r]);
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < ranks; ++r) EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
    // The trainers keep their communicators' group alive no longer than
    // here: nothing collective runs after this.
    groups_.push_back(std::move(groups));
    return trainers;
  }

  // 3,000 generated examples, written and read back as Criteo text.
  Result<io::Dataset> TrainData() {
    io::SyntheticOptions synthetic;
    synthetic.rows = 3000;
    EMBER_RETURN_IF_ERROR(io::WriteSyntheticCriteo(Path("train.tsv"), synthetic).status());
    return io::ReadCriteoFiles({Path("train.tsv")}, io::CriteoReadOptions{});
  }

  std::vector<std::vector<Comms>> groups_;
};

// Resharding moves every row to its new owner: the set of rows (keys,
// vectors, optimizer state, metadata) is the same on 3 ranks as on the 2 that
// saved it, and after the 3 train on and save, the same on 2 again.
TEST_F(RankCheckpointTest, ReshardingKeepsEveryRowAndTrainingGoesOn) {
  Result<io::Dataset> train = TrainData();
  ASSERT_TRUE(train.ok()) << train.status();

  auto two = Run(2, *train, false, 6);
  const auto saved = AllRows(two);
  auto record = FindRanksCheckpoint(Path("ckpt"));
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(2, record->ranks);
  EXPECT_EQ(6, record->step);
  ASSERT_GT(saved.size(), 100u);
  // One writer per checkpoint directory: a job's trainers are gone before
  // the next job's open it.
  two.clear();

  auto three = Run(3, *train, true, 0);
  EXPECT_EQ("", RowDifference(saved, AllRows(three)));
  for (auto& trainer : three) {
    std::map<uint64_t, std::vector<float>> own;
    CollectRows(trainer->table(), &own);
    for (const auto& [key, row] : own) ASSERT_EQ(embedding::KeyOwner(key, 3), &trainer - &three[0]);
  }

  // The three train on from step 6 and save step 9; two take it back.
  three.clear();
  auto trained = Run(3, *train, true, 9);
  const auto after = AllRows(trained);
  EXPECT_NE("", RowDifference(saved, after));
  record = FindRanksCheckpoint(Path("ckpt"));
  ASSERT_TRUE(record.ok());
  EXPECT_EQ(3, record->ranks);
  EXPECT_EQ(9, record->step);
  trained.clear();
  auto back = Run(2, *train, true, 0);
  EXPECT_EQ("", RowDifference(after, AllRows(back)));
}

// A job killed after its ranks saved and before RANKS was written (the crash
// point ranks.all_saved) has no checkpoint: the restarted job starts afresh,
// sets aside what its ranks had saved, saves the same steps again and ends
// with the rows of an uninterrupted job (the crash test found it refusing:
// "full snapshot at step 6, but the directory already holds step 6").
TEST_F(RankCheckpointTest, SavesThatTheJobNeverCommittedAreSetAsideByTheRestart) {
  Result<io::Dataset> train = TrainData();
  ASSERT_TRUE(train.ok()) << train.status();
  auto first = Run(2, *train, false, 6);
  const auto uninterrupted = AllRows(first);
  first.clear();
  ASSERT_TRUE(std::filesystem::remove(Path("ckpt/RANKS")));
  ASSERT_EQ(StatusCode::kNotFound, FindRanksCheckpoint(Path("ckpt")).status().code());

  auto again = Run(2, *train, false, 6);
  EXPECT_EQ("", RowDifference(uninterrupted, AllRows(again)));
  auto record = FindRanksCheckpoint(Path("ckpt"));
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(6, record->step);
  again.clear();
  // And the committed checkpoint restores.
  auto restored = Run(2, *train, true, 0);
  EXPECT_EQ("", RowDifference(uninterrupted, AllRows(restored)));
}

// A save that not every rank finished is not the job's checkpoint: RANKS
// still names the last whole one.
TEST_F(RankCheckpointTest, ACheckpointIsTheJobsOnlyOnceEveryRankSavedIt) {
  ASSERT_TRUE(CommitRanksCheckpoint(nullptr, Path(""), 4).ok());
  auto record = FindRanksCheckpoint(Path(""));
  ASSERT_TRUE(record.ok());
  EXPECT_EQ(1, record->ranks);
  EXPECT_EQ(4, record->step);
  ASSERT_TRUE(WriteFileAtomic(Path("RANKS"), "{\"format\": \"ember-ranks\"}").ok());
  EXPECT_EQ(StatusCode::kDataLoss, FindRanksCheckpoint(Path("")).status().code());
  EXPECT_EQ(StatusCode::kNotFound, FindRanksCheckpoint(Path("nothing")).status().code());
}

INSTANTIATE_TEST_SUITE_P(Ranks, DistributedTrainerTest,
                         ::testing::Values(Param{2, false, false}, Param{2, true, false},
                                           Param{3, false, false}, Param{3, true, false},
                                           Param{2, true, true}, Param{2, false, false, true},
                                           Param{3, true, false, true},
                                           Param{3, true, true, true},
                                           Param{1, false, false, true, "moe"},
                                           Param{2, true, false, true, "moe"},
                                           Param{4, false, false, true, "moe"},
                                           Param{3, true, false, false, "moe"},
                                           Param{2, false, false, false, "moe", false},
                                           Param{2, false, false, false, "dlrm", true, 2},
                                           Param{3, true, false, false, "dlrm", true, 2}),
                         ParamName);

}  // namespace
}  // namespace ember::engine
