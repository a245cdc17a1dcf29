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
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/in_process_communicator.h"
#include "core/random.h"
#include "embedding/sharded_table.h"
#include "embedding/stored_rows.h"
#include "engine/trainer.h"
#include "io/criteo.h"
#include "io/synthetic.h"
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
};

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  return std::to_string(info.param.ranks) + "Ranks" +
         (info.param.pipelined ? "Pipelined" : "Sequential") +
         (info.param.disk_tier ? "Tiered" : "InMemory") + (info.param.bitwise ? "Bitwise" : "");
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
    options.model.bottom_mlp = {32, 16};
    options.model.top_mlp = {32, 16};
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
  std::printf("%d ranks vs one: max |difference| rows %.3g, dense %.3g, predictions %.3g; "
              "test AUC %.6f vs %.6f\n",
              ranks, row_diff, dense_diff, prediction_diff, aucs[0], metrics->auc);
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(aucs[r], aucs[0]) << "rank " << r;
  if (bitwise) {
    EXPECT_EQ(row_diff, 0.0);
    EXPECT_EQ(dense_diff, 0.0);
    EXPECT_EQ(prediction_diff, 0.0);
    EXPECT_EQ(aucs[0], metrics->auc);
  } else {
    // Rows trained with Adagrad amplify the last bit of a summed gradient
    // early on (a step is lr x g / |g| at first); the model's predictions
    // and its AUC stay put.
    EXPECT_LE(row_diff, 1e-3);
    EXPECT_LE(dense_diff, 1e-6);
    EXPECT_LE(prediction_diff, 5e-6);
    EXPECT_NEAR(aucs[0], metrics->auc, 5e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, DistributedTrainerTest,
                         ::testing::Values(Param{2, false, false}, Param{2, true, false},
                                           Param{3, false, false}, Param{3, true, false},
                                           Param{2, true, true}, Param{2, false, false, true},
                                           Param{3, true, false, true},
                                           Param{3, true, true, true}),
                         ParamName);

}  // namespace
}  // namespace ember::engine
