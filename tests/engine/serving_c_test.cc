// libember_serving's C API (engine/serving/ember_serving.h) against the
// engine's Scorer, which `ember predict` runs.
#include "engine/serving/ember_serving.h"

#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/bundle.h"
#include "engine/bundle_delta.h"
#include "engine/scorer.h"
#include "engine/trainer.h"
#include "io/criteo.h"
#include "io/synthetic.h"
#include "tests/testing/temp_dir.h"

namespace ember::engine {
namespace {

using ::testing::HasSubstr;

class ServingCTest : public test::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    io::SyntheticOptions synthetic;
    synthetic.rows = 1500;
    synthetic.vocabulary = 300;
    ASSERT_TRUE(io::WriteSyntheticCriteo(Path("train.tsv"), synthetic).ok());
    synthetic.rows = 300;
    synthetic.seed = 2;
    ASSERT_TRUE(io::WriteSyntheticCriteo(Path("test.tsv"), synthetic).ok());
    auto train = io::ReadCriteoFiles({Path("train.tsv")}, io::CriteoReadOptions{});
    ASSERT_TRUE(train.ok()) << train.status();
    TrainOptions options;
    options.model.params.Set("bottom_mlp", std::vector<int>{32, 16});
    options.model.top_mlp = {32};
    options.table.dim = 8;
    options.batch_size = 128;
    options.threads = 1;
    options.show_progress = false;
    auto trainer = Trainer::Create(options, train->num_dense(), train->num_slots());
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    ASSERT_TRUE((*trainer)->Fit(*train).ok());
    train_ = *std::move(train);
    const BundleConfig config = BundleConfigOf((*trainer)->options(), io::FormatSpec{}, false, 1);
    ASSERT_TRUE(WriteBundle(Path("bundle"), config, (*trainer)->model(), (*trainer)->table()).ok());
    trainer_ = *std::move(trainer);
    std::ifstream in(Path("test.tsv"));
    for (std::string line; std::getline(in, line);) lines_.push_back(line);
    for (const std::string& line : lines_) {
      unlabelled_.push_back(line.substr(line.find('\t') + 1));
    }
    test_ = *io::ReadCriteoFiles({Path("test.tsv")}, io::CriteoReadOptions{});
    ASSERT_EQ(static_cast<int64_t>(lines_.size()), test_.size());
  }

  // What the engine's scorer (ember predict's) gives for the test set in one batch.
  std::vector<float> Expected() {
    auto scorer = Scorer::Open(Path("bundle"));
    EXPECT_TRUE(scorer.ok()) << scorer.status();
    std::vector<float> scores;
    EXPECT_TRUE((*scorer)->Score(test_.all(), &scores).ok());
    return scores;
  }

  static std::vector<const char*> Pointers(const std::vector<std::string>& lines) {
    std::vector<const char*> pointers;
    for (const std::string& line : lines) pointers.push_back(line.c_str());
    return pointers;
  }

  std::vector<std::string> lines_, unlabelled_;
  io::Dataset train_, test_;
  std::unique_ptr<Trainer> trainer_;
};

TEST_F(ServingCTest, LinesScoreAsTheEngineScoresThemFromFourThreads) {
  const std::vector<float> expected = Expected();
  ember_model* model = nullptr;
  ember_error error;
  ASSERT_EQ(EMBER_OK, ember_model_open(Path("bundle").c_str(), 1, &model, &error))
      << error.message;
  EXPECT_EQ(1, ember_model_num_tasks(model));
  EXPECT_EQ(13, ember_model_num_dense(model));
  EXPECT_EQ(26, ember_model_num_slots(model));
  const std::vector<const char*> labelled = Pointers(lines_), unlabelled = Pointers(unlabelled_);
  std::vector<std::vector<float>> results(4, std::vector<float>(lines_.size()));
  std::vector<ember_code> codes(4, EMBER_INTERNAL);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        // Half the threads score the lines without their labels.
        const auto& lines = t % 2 == 0 ? labelled : unlabelled;
        codes[t] = ember_score_lines(model, lines.data(), lines.size(), t % 2 == 0,
                                     results[t].data(), nullptr);
        if (codes[t] != EMBER_OK) return;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < 4; ++t) {
    ASSERT_EQ(EMBER_OK, codes[t]);
    EXPECT_EQ(0, std::memcmp(expected.data(), results[t].data(), expected.size() * sizeof(float)))
        << "thread " << t;
  }
  ember_model_close(model);
}

TEST_F(ServingCTest, KeysScoreAsTheirLinesAndHashAsTrainingDid) {
  const std::vector<float> expected = Expected();
  ember_model* model = nullptr;
  ASSERT_EQ(EMBER_OK, ember_model_open(Path("bundle").c_str(), 1, &model, nullptr));
  const io::Batch& batch = test_.all();
  std::vector<float> scores(batch.size);
  ember_error error;
  ASSERT_EQ(EMBER_OK, ember_score_keys(model, batch.size, batch.dense.data(),
                                       batch.offsets.data(), batch.keys.data(), scores.data(),
                                       &error))
      << error.message;
  EXPECT_EQ(expected, scores);
  // The first categorical column of the first line is slot 0's value.
  const std::string& line = lines_.front();
  size_t start = 0;
  for (int column = 0; column < 14; ++column) start = line.find('\t', start) + 1;
  const std::string value = line.substr(start, line.find('\t', start) - start);
  EXPECT_EQ(batch.keys[0], ember_hash_feature(model, 0, value.data(), value.size()));
  ember_model_close(model);
}

TEST_F(ServingCTest, ABadLineIsAnErrorNamingIt) {
  ember_model* model = nullptr;
  ASSERT_EQ(EMBER_OK, ember_model_open(Path("bundle").c_str(), 1, &model, nullptr));
  std::vector<std::string> lines = {lines_[0], "1\t2\tthree"};
  const std::vector<const char*> pointers = Pointers(lines);
  std::vector<float> scores(2);
  ember_error error;
  EXPECT_EQ(EMBER_INVALID_ARGUMENT,
            ember_score_lines(model, pointers.data(), 2, 1, scores.data(), &error));
  EXPECT_EQ(EMBER_INVALID_ARGUMENT, error.code);
  EXPECT_THAT(error.message, HasSubstr("line 1"));
  std::vector<int64_t> offsets(27, 0);
  offsets[5] = -1;
  std::vector<float> dense(13, 0.0f);
  EXPECT_EQ(EMBER_INVALID_ARGUMENT, ember_score_keys(model, 1, dense.data(), offsets.data(),
                                                     nullptr, scores.data(), &error));
  EXPECT_THAT(error.message, HasSubstr("offsets[5]"));
  ember_model_close(model);
}

// A service applies a delta bundle to the model it holds: it then scores as
// the full bundle of the delta's step; a delta of another base is refused.
TEST_F(ServingCTest, ADeltaAppliedToTheOpenModelScoresAsTheFullBundle) {
  ASSERT_TRUE(trainer_->Fit(train_).ok());  // A second epoch.
  const BundleConfig config = BundleConfigOf(trainer_->options(), io::FormatSpec{}, false, 2);
  ASSERT_TRUE(WriteBundle(Path("full"), config, trainer_->model(), trainer_->table()).ok());
  Result<BundleRowPrints> base = ReadBundleRowPrints(Path("bundle"));
  ASSERT_TRUE(base.ok()) << base.status();
  ASSERT_TRUE(WriteDeltaBundle(Path("delta"), config, trainer_->model(), trainer_->table(), *base)
                  .ok());
  auto full = Scorer::Open(Path("full"));
  ASSERT_TRUE(full.ok());
  std::vector<float> expected;
  ASSERT_TRUE((*full)->Score(test_.all(), &expected).ok());

  ember_model* model = nullptr;
  ember_error error;
  ASSERT_EQ(EMBER_OK, ember_model_open(Path("bundle").c_str(), 1, &model, &error))
      << error.message;
  EXPECT_EQ(1, ember_model_step(model));
  const std::vector<const char*> lines = Pointers(lines_);
  std::vector<float> before(lines.size()), after(lines.size());
  ASSERT_EQ(EMBER_OK, ember_score_lines(model, lines.data(), lines.size(), 1, before.data(),
                                        &error));
  EXPECT_NE(expected, before);
  ASSERT_EQ(EMBER_OK, ember_model_apply_delta(model, Path("delta").c_str(), &error))
      << error.message;
  EXPECT_EQ(2, ember_model_step(model));
  ASSERT_EQ(EMBER_OK, ember_score_lines(model, lines.data(), lines.size(), 1, after.data(),
                                        &error));
  EXPECT_EQ(expected, after);
  // The model is now the delta's: the delta's base is not.
  EXPECT_EQ(EMBER_FAILED_PRECONDITION,
            ember_model_apply_delta(model, Path("delta").c_str(), &error));
  EXPECT_THAT(error.message, HasSubstr(base->bundle.manifest_hash));
  EXPECT_EQ(EMBER_INVALID_ARGUMENT, ember_model_apply_delta(model, nullptr, &error));
  ember_model_close(model);
}

TEST_F(ServingCTest, AMissingOrDamagedBundleIsAnErrorNamingTheFile) {
  ember_model* model = reinterpret_cast<ember_model*>(1);
  ember_error error;
  EXPECT_EQ(EMBER_NOT_FOUND, ember_model_open(Path("nothing").c_str(), 1, &model, &error));
  EXPECT_EQ(nullptr, model);
  EXPECT_THAT(error.message, HasSubstr(Path("nothing")));
  {
    std::fstream dense(Path("bundle/dense.bin"), std::ios::in | std::ios::out | std::ios::binary);
    dense.seekp(8);
    dense.write("\x7f", 1);
  }
  EXPECT_EQ(EMBER_DATA_LOSS, ember_model_open(Path("bundle").c_str(), 1, &model, &error));
  EXPECT_THAT(error.message, HasSubstr(Path("bundle/dense.bin")));
}

}  // namespace
}  // namespace ember::engine
