#include "engine/bundle_delta.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "embedding/stored_rows.h"
#include "engine/bundle.h"
#include "engine/model.h"
#include "engine/scorer.h"
#include "engine/trainer.h"
#include "io/columnar.h"
#include "io/synthetic.h"
#include "tests/engine/score_all.h"
#include "tests/testing/temp_dir.h"

namespace ember::engine {
namespace {

using ::testing::HasSubstr;

constexpr int kEvalBatch = 256;

// A model trained in three parts, with a full bundle after each (base, full2,
// full3) and the deltas between them (delta2 against base, delta3 against
// delta2, a chain); some rows are removed before each later bundle, as TTL
// eviction would.
class BundleDeltaTest : public test::TempDirTest {
 protected:
  void SetUp() override {
    test::TempDirTest::SetUp();
    io::SyntheticOptions synthetic;
    synthetic.rows = 2400;
    synthetic.num_dense = 4;
    synthetic.num_slots = 6;
    synthetic.multi_hot_slots = 2;
    synthetic.vocabulary = 400;
    synthetic.num_tasks = 1;
    synthetic.format = io::SyntheticFormat::kColumnar;
    ASSERT_TRUE(io::WriteSynthetic(Path("data.col"), synthetic).ok());
    Result<io::Dataset> all = io::ReadColumnarDataset(Path("data.col"));
    ASSERT_TRUE(all.ok()) << all.status();
    test_ = all->Slice(1800, all->size());
    TrainOptions options;
    options.model.name = "dlrm";
    options.model.params.Set("bottom_mlp", std::vector<int>{16, 8});
    options.model.top_mlp = {16, 8};
    options.table.dim = 8;
    options.batch_size = 128;
    options.eval_batch_size = kEvalBatch;
    options.threads = 1;
    options.show_progress = false;
    auto trainer = Trainer::Create(options, all->num_dense(), all->num_slots(), all->num_labels());
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    Trainer& t = **trainer;
    for (int part = 0; part < 3; ++part) {
      ASSERT_TRUE(t.Fit(all->Slice(part * 600, (part + 1) * 600)).ok());
      if (part > 0) RemoveSomeRows(t.table(), 7 * part);
      const BundleConfig config = BundleConfigOf(t.options(), io::FormatSpec(), true, part + 1);
      const std::string full = Path(part == 0 ? "base" : "full" + std::to_string(part + 1));
      ASSERT_TRUE(WriteBundle(full, config, t.model(), t.table()).ok());
      if (part == 0) continue;
      // Each delta against the bundle before it, as a service holds it.
      const std::string before = part == 1 ? Path("base") : Path("delta2");
      Result<BundleRowPrints> base = ReadBundleRowPrints(before);
      ASSERT_TRUE(base.ok()) << base.status();
      const Status written = WriteDeltaBundle(Path("delta" + std::to_string(part + 1)), config,
                                              t.model(), t.table(), *base);
      ASSERT_TRUE(written.ok()) << written;
    }
  }

  // Erases `count` of the table's rows.
  static void RemoveSomeRows(embedding::EmbeddingTable& table, int count) {
    std::vector<embedding::Key> keys;
    ASSERT_TRUE(table.stored_rows()
                    .Scan([&](embedding::Key key, const float*) {
                      if (static_cast<int>(keys.size()) < count) keys.push_back(key);
                      return Status::OK();
                    })
                    .ok());
    ASSERT_TRUE(table.stored_rows().EraseRows(keys).ok());
  }

  std::vector<float> Scores(Scorer& scorer) {
    Result<std::vector<float>> scores = test::ScoreAll(scorer, test_, kEvalBatch);
    EXPECT_TRUE(scores.ok()) << scores.status();
    return scores.ok() ? *scores : std::vector<float>{};
  }
  std::vector<float> ScoresOf(const std::string& bundle) {
    auto scorer = Scorer::Open(bundle);
    EXPECT_TRUE(scorer.ok()) << scorer.status();
    return scorer.ok() ? Scores(**scorer) : std::vector<float>{};
  }
  std::unique_ptr<Scorer> OpenBase() {
    auto scorer = Scorer::Open(Path("base"));
    EXPECT_TRUE(scorer.ok()) << scorer.status();
    return scorer.ok() ? *std::move(scorer) : nullptr;
  }

  io::Dataset test_;
};

TEST_F(BundleDeltaTest, BasePlusDeltasScoresTheBitsOfTheFullBundle) {
  std::unique_ptr<Scorer> scorer = OpenBase();
  ASSERT_NE(nullptr, scorer);
  const std::vector<float> base = Scores(*scorer);
  ASSERT_TRUE(scorer->ApplyDelta(Path("delta2")).ok());
  EXPECT_EQ(2, scorer->step());
  const std::vector<float> full2 = ScoresOf(Path("full2"));
  EXPECT_NE(base, full2);  // The training between them changed the model.
  EXPECT_EQ(full2, Scores(*scorer));
  const Status applied = scorer->ApplyDelta(Path("delta3"));
  ASSERT_TRUE(applied.ok()) << applied;
  EXPECT_EQ(3, scorer->step());
  EXPECT_EQ(ScoresOf(Path("full3")), Scores(*scorer));
  auto full3 = Scorer::Open(Path("full3"));
  ASSERT_TRUE(full3.ok());
  EXPECT_EQ((*full3)->embedding_rows(), scorer->embedding_rows());
}

TEST_F(BundleDeltaTest, ADeltaHoldsOnlyTheChangedAndRemovedRows) {
  Result<VerifiedBundle> delta = VerifyBundle(Path("delta2"));
  ASSERT_TRUE(delta.ok()) << delta.status();
  ASSERT_TRUE(delta->is_delta());
  Result<VerifiedBundle> base = VerifyBundle(Path("base"));
  ASSERT_TRUE(base.ok());
  EXPECT_EQ(base->manifest_hash, delta->delta.base_hash);
  EXPECT_EQ(1, delta->delta.base_step);
  EXPECT_EQ(7, delta->delta.removed_rows);
  // The rows the second part trained on, not every row.
  EXPECT_GT(delta->delta.changed_rows, 0);
  EXPECT_LT(delta->delta.changed_rows, delta->embedding_rows);
  // The chain's prints (base, delta2, delta3) are full3's.
  Result<BundleRowPrints> full3 = ReadBundleRowPrints(Path("full3"));
  ASSERT_TRUE(full3.ok());
  Result<BundleRowPrints> chain = ReadBundleRowPrints(Path("delta3"));
  ASSERT_TRUE(chain.ok()) << chain.status();
  EXPECT_EQ(full3->rows, chain->rows);
}

TEST_F(BundleDeltaTest, ADeltaOfAnotherBaseIsRefusedNamingBothAndChangesNothing) {
  std::unique_ptr<Scorer> scorer = OpenBase();
  ASSERT_NE(nullptr, scorer);
  const std::vector<float> base = Scores(*scorer);
  const Status wrong = scorer->ApplyDelta(Path("delta3"));  // A delta of delta2.
  ASSERT_EQ(StatusCode::kFailedPrecondition, wrong.code()) << wrong;
  Result<VerifiedBundle> delta2 = VerifyBundle(Path("delta2"));
  ASSERT_TRUE(delta2.ok());
  EXPECT_THAT(wrong.message(), HasSubstr(delta2->manifest_hash));
  EXPECT_THAT(wrong.message(), HasSubstr(scorer->manifest_hash()));
  EXPECT_THAT(wrong.message(), HasSubstr(Path("base")));
  EXPECT_EQ(1, scorer->step());
  EXPECT_EQ(base, Scores(*scorer));
  // A full bundle is not a delta, and a delta cannot be opened alone.
  EXPECT_EQ(StatusCode::kInvalidArgument, scorer->ApplyDelta(Path("full2")).code());
  auto opened = Scorer::Open(Path("delta2"));
  ASSERT_FALSE(opened.ok());
  EXPECT_THAT(opened.status().message(), HasSubstr("delta"));
  // Applied twice: the second finds the model already past its base.
  ASSERT_TRUE(scorer->ApplyDelta(Path("delta2")).ok());
  EXPECT_EQ(StatusCode::kFailedPrecondition, scorer->ApplyDelta(Path("delta2")).code());
}

TEST_F(BundleDeltaTest, ADamagedDeltaIsRefusedAndChangesNothing) {
  std::unique_ptr<Scorer> scorer = OpenBase();
  ASSERT_NE(nullptr, scorer);
  const std::vector<float> base = Scores(*scorer);
  {
    std::ofstream removed(Path("delta2/removed.bin"), std::ios::binary | std::ios::app);
    removed << "x";
  }
  const Status damaged = scorer->ApplyDelta(Path("delta2"));
  EXPECT_EQ(StatusCode::kDataLoss, damaged.code()) << damaged;
  EXPECT_THAT(damaged.message(), HasSubstr("removed.bin"));
  EXPECT_EQ(base, Scores(*scorer));
}

TEST_F(BundleDeltaTest, ScoringWhileADeltaAppliesSeesTheModelBeforeOrAfterNeverAMix) {
  std::unique_ptr<Scorer> scorer = OpenBase();
  ASSERT_NE(nullptr, scorer);
  auto full2 = Scorer::Open(Path("full2"));
  ASSERT_TRUE(full2.ok());
  // One batch of every test example: one Score call, one model.
  io::DatasetBatchSourceOptions options;
  options.batch_size = test_.size();
  io::DatasetBatchSource source(test_, options);
  io::Batch batch;
  ASSERT_TRUE(*source.Next(&batch));
  std::vector<float> before, after;
  ASSERT_TRUE(scorer->Score(batch, &before).ok());
  ASSERT_TRUE((*full2)->Score(batch, &after).ok());
  ASSERT_NE(before, after);
  std::atomic<bool> done{false};
  std::atomic<int> mixed{0}, seen_before{0}, seen_after{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      while (!done.load()) {
        std::vector<float> scores;
        if (!scorer->Score(batch, &scores).ok()) continue;
        if (scores == before) {
          ++seen_before;
        } else if (scores == after) {
          ++seen_after;
        } else {
          ++mixed;
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const Status applied = scorer->ApplyDelta(Path("delta2"));
  EXPECT_TRUE(applied.ok()) << applied;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  done = true;
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(0, mixed.load());
  EXPECT_GT(seen_before.load(), 0);
  EXPECT_GT(seen_after.load(), 0);
}

TEST_F(BundleDeltaTest, ADeltaOfAnotherModelCannotBeWritten) {
  Result<BundleRowPrints> base = ReadBundleRowPrints(Path("base"));
  ASSERT_TRUE(base.ok());
  BundleConfig other = base->bundle.config;
  other.model.top_mlp = {8};
  auto model = NewDenseModel(other.model);
  ASSERT_TRUE(model.ok());
  embedding::EmbeddingTableOptions table_options = ServingTableOptions(other);
  auto table = embedding::NewMemoryTable(table_options);
  ASSERT_TRUE(table.ok());
  const Status written = WriteDeltaBundle(Path("other"), other, **model, **table, *base);
  EXPECT_EQ(StatusCode::kInvalidArgument, written.code());
  EXPECT_THAT(written.message(), HasSubstr("top_mlp"));
  EXPECT_FALSE(std::filesystem::exists(Path("other")));
}

}  // namespace
}  // namespace ember::engine
