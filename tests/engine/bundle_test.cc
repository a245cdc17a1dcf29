#include "engine/bundle.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/file.h"
#include "core/json.h"
#include "embedding/checkpoint.h"
#include "embedding/embedding_table.h"
#include "engine/model_registry.h"
#include "engine/model_zoo.h"
#include "engine/scorer.h"
#include "engine/trainer.h"
#include "io/batch_source.h"
#include "io/columnar.h"
#include "io/synthetic.h"
#include "tests/engine/score_all.h"
#include "tests/testing/in_process_ranks.h"
#include "tests/testing/temp_dir.h"

namespace ember::engine {
namespace {

using ::testing::HasSubstr;

constexpr int kEvalBatch = 256;

class BundleTest : public test::TempDirTest {
 protected:
  static TrainOptions SmallOptions(const std::string& model) {
    TrainOptions options;
    options.model.name = model;
    options.model.params.Set("bottom_mlp", std::vector<int>{32, 16});
    options.model.top_mlp = {32, 16};
    options.model.params.Set("expert_mlp", std::vector<int>{32, 16});
    options.model.params.Set("num_experts", 2);
    options.model.params.Set("cross_layers", 2);
    options.table.dim = 8;
    options.batch_size = 128;
    options.eval_batch_size = kEvalBatch;
    options.threads = 2;
    options.show_progress = false;
    return options;
  }

  // `rows` synthetic examples of `tasks` labels with two multi-hot slots,
  // written as a columnar file and read back.
  Result<io::Dataset> Data(int64_t rows, int tasks) {
    io::SyntheticOptions synthetic;
    synthetic.rows = rows;
    synthetic.num_dense = 4;
    synthetic.num_slots = 6;
    synthetic.multi_hot_slots = 2;
    synthetic.vocabulary = 400;
    synthetic.num_tasks = tasks;
    synthetic.format = io::SyntheticFormat::kColumnar;
    const std::string path = Path("data.col");
    EMBER_RETURN_IF_ERROR(io::WriteSynthetic(path, synthetic).status());
    return io::ReadColumnarDataset(path);
  }

  // Trains `model` on the first 80% of the data and writes its bundle at
  // `bundle`; `*test` is the rest, `*expected` the trainer's own predictions
  // of it.
  void TrainAndExport(const std::string& model, const std::string& bundle, io::Dataset* test,
                      std::vector<float>* expected) {
    Result<io::Dataset> all = Data(2000, DefaultTaskCount(model));
    ASSERT_TRUE(all.ok()) << all.status();
    const io::Dataset train = all->Slice(0, 1600);
    *test = all->Slice(1600, all->size());
    auto trainer = Trainer::Create(SmallOptions(model), train.num_dense(), train.num_slots(),
                                   train.num_labels());
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    ASSERT_TRUE((*trainer)->Fit(train).ok());
    Result<std::vector<float>> predicted = (*trainer)->Predict(*test);
    ASSERT_TRUE(predicted.ok()) << predicted.status();
    *expected = *predicted;
    io::FormatSpec input;
    const BundleConfig config = BundleConfigOf((*trainer)->options(), input, true, 13);
    const Status written =
        WriteBundle(bundle, config, (*trainer)->model(), (*trainer)->table());
    ASSERT_TRUE(written.ok()) << written;
  }

  // The scores of `data` in evaluation batches, as the trainer batches it.
  static Result<std::vector<float>> ScoreAll(Scorer& scorer, const io::Dataset& data) {
    return test::ScoreAll(scorer, data, kEvalBatch);
  }

  static void FlipByte(const std::string& path, int64_t offset) {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(offset);
    char c = 0;
    file.read(&c, 1);
    c ^= 0x20;
    file.seekp(offset);
    file.write(&c, 1);
  }

  std::string SmallBundle() {
    io::Dataset test;
    std::vector<float> expected;
    TrainAndExport("dlrm", Path("bundle"), &test, &expected);
    return Path("bundle");
  }
};

class BundleZooTest : public BundleTest, public ::testing::WithParamInterface<std::string> {};

// The bundle scores every test example to the bits of the trainer's own
// evaluation, keys unseen in training included.
TEST_P(BundleZooTest, ScoresEqualTheTrainersEvaluationBitForBit) {
  io::Dataset test;
  std::vector<float> expected;
  TrainAndExport(GetParam(), Path("bundle"), &test, &expected);
  ScorerOptions options;
  options.threads = 2;  // The trainer's.
  auto scorer = Scorer::Open(Path("bundle"), options);
  ASSERT_TRUE(scorer.ok()) << scorer.status();
  EXPECT_EQ(GetParam(), (*scorer)->config().model.name);
  EXPECT_EQ(13, (*scorer)->config().step);
  // The manifest holds the model's own parameters, in their declared order,
  // and no other model's (the test set several models' parameters).
  Result<const ModelSpec*> spec = DefaultModelRegistry().Find(GetParam());
  ASSERT_TRUE(spec.ok()) << spec.status();
  const ModelParams& params = (*scorer)->config().model.params;
  ASSERT_EQ((*spec)->params.size(), params.values().size());
  Result<std::string> text = ReadFile(Path("bundle/MANIFEST.json"));
  ASSERT_TRUE(text.ok()) << text.status();
  Result<Json> manifest = ParseJsonText(*text);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  const Json& written = (*manifest)["model"];
  for (size_t i = 0; i < params.values().size(); ++i) {
    EXPECT_EQ((*spec)->params[i].name, params.values()[i].first);
    EXPECT_TRUE(written.contains(params.values()[i].first)) << params.values()[i].first;
  }
  for (const char* other : {"bottom_mlp", "cross_layers", "num_experts", "expert_mlp"}) {
    EXPECT_EQ((*spec)->FindParam(other) != nullptr, written.contains(other)) << other;
  }
  Result<std::vector<float>> scores = ScoreAll(**scorer, test);
  ASSERT_TRUE(scores.ok()) << scores.status();
  ASSERT_EQ(expected.size(), scores->size());
  EXPECT_EQ(test.size() * test.num_labels(), static_cast<int64_t>(scores->size()));
  EXPECT_EQ(0, std::memcmp(expected.data(), scores->data(), expected.size() * sizeof(float)));
}

INSTANTIATE_TEST_SUITE_P(EveryModel, BundleZooTest, ::testing::ValuesIn(ModelNames()));

TEST_F(BundleTest, ConcurrentScoresEqualSequentialOnes) {
  io::Dataset test;
  std::vector<float> expected;
  TrainAndExport("deepfm", Path("bundle"), &test, &expected);
  auto scorer = Scorer::Open(Path("bundle"));
  ASSERT_TRUE(scorer.ok()) << scorer.status();
  Result<std::vector<float>> sequential = ScoreAll(**scorer, test);
  ASSERT_TRUE(sequential.ok()) << sequential.status();
  std::vector<std::vector<float>> results(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        Result<std::vector<float>> scores = ScoreAll(**scorer, test);
        if (scores.ok()) results[t] = *scores;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const std::vector<float>& result : results) EXPECT_EQ(*sequential, result);
}

TEST_F(BundleTest, ABundleWrittenAgainReplacesTheEarlierOneWhole) {
  const std::string bundle = SmallBundle();
  io::Dataset test;
  std::vector<float> expected;
  TrainAndExport("wide_deep", bundle, &test, &expected);
  auto scorer = Scorer::Open(bundle);
  ASSERT_TRUE(scorer.ok()) << scorer.status();
  EXPECT_EQ("wide_deep", (*scorer)->config().model.name);
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    EXPECT_FALSE(entry.path().filename().string().starts_with(".tmp-")) << entry.path();
  }
}

TEST_F(BundleTest, AWriteStoppedBeforeItsCommitLeavesTheEarlierBundle) {
  const std::string bundle = SmallBundle();
  auto trainer = Trainer::Create(SmallOptions("dcn_v2"), 4, 6, 1);
  ASSERT_TRUE(trainer.ok());
  BundleWriteOptions options;
  options.before_commit = [](const std::string&) { return Status::IOError("disk gone"); };
  const BundleConfig config = BundleConfigOf((*trainer)->options(), {}, true, 0);
  const Status status = WriteBundle(bundle, config, (*trainer)->model(), (*trainer)->table(),
                                    options);
  EXPECT_EQ(StatusCode::kIOError, status.code());
  auto scorer = Scorer::Open(bundle);
  ASSERT_TRUE(scorer.ok()) << scorer.status();
  EXPECT_EQ("dlrm", (*scorer)->config().model.name);
  // And a first write stopped so leaves nothing.
  EXPECT_FALSE(WriteBundle(Path("new"), config, (*trainer)->model(), (*trainer)->table(), options)
                   .ok());
  EXPECT_FALSE(std::filesystem::exists(Path("new")));
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    EXPECT_FALSE(entry.path().filename().string().starts_with(".tmp-")) << entry.path();
  }
}

TEST_F(BundleTest, APartlyWrittenBundleIsRefusedNamingItsManifest) {
  const std::string bundle = SmallBundle();
  std::filesystem::remove(bundle + "/MANIFEST.json");
  auto scorer = Scorer::Open(bundle);
  ASSERT_FALSE(scorer.ok());
  EXPECT_EQ(StatusCode::kNotFound, scorer.status().code());
  EXPECT_THAT(scorer.status().message(), HasSubstr(bundle + "/MANIFEST.json"));
}

TEST_F(BundleTest, ACorruptedDenseFileIsRefusedNamingIt) {
  const std::string bundle = SmallBundle();
  FlipByte(bundle + "/dense.bin", 100);
  auto scorer = Scorer::Open(bundle);
  ASSERT_FALSE(scorer.ok());
  EXPECT_EQ(StatusCode::kDataLoss, scorer.status().code());
  EXPECT_THAT(scorer.status().message(), HasSubstr(bundle + "/dense.bin"));
}

TEST_F(BundleTest, ATruncatedEmbeddingFileIsRefusedNamingIt) {
  const std::string bundle = SmallBundle();
  const std::string vectors = bundle + "/embedding/vectors-00000.bin";
  ASSERT_TRUE(std::filesystem::exists(vectors));
  std::filesystem::resize_file(vectors, std::filesystem::file_size(vectors) - 12);
  auto scorer = Scorer::Open(bundle);
  ASSERT_FALSE(scorer.ok());
  EXPECT_EQ(StatusCode::kDataLoss, scorer.status().code());
  EXPECT_THAT(scorer.status().message(), HasSubstr(vectors));
  EXPECT_THAT(scorer.status().message(), HasSubstr("truncated"));
}

TEST_F(BundleTest, AnEditedManifestIsRefused) {
  const std::string bundle = SmallBundle();
  const std::string manifest = bundle + "/MANIFEST.json";
  Result<std::string> text = ReadFile(manifest);
  ASSERT_TRUE(text.ok());
  std::string edited = *text;
  const std::string field = "\"cpu_row_shards\": 0";
  const size_t at = edited.find(field);
  ASSERT_NE(std::string::npos, at) << edited;
  edited.replace(at, field.size(), "\"cpu_row_shards\": 3");
  ASSERT_TRUE(WriteFileAtomic(manifest, edited).ok());
  auto scorer = Scorer::Open(bundle);
  ASSERT_FALSE(scorer.ok());
  EXPECT_EQ(StatusCode::kDataLoss, scorer.status().code());
  EXPECT_THAT(scorer.status().message(), HasSubstr(manifest));
  EXPECT_THAT(scorer.status().message(), HasSubstr("manifest_hash"));
}

TEST_F(BundleTest, AnotherVersionIsRefusedNamingIt) {
  const std::string bundle = SmallBundle();
  const std::string manifest = bundle + "/MANIFEST.json";
  Result<std::string> text = ReadFile(manifest);
  ASSERT_TRUE(text.ok());
  std::string edited = *text;
  // An unsharded bundle is written as version 3 (version 4 readers read it).
  const std::string version = "\"version\": 3";
  const size_t at = edited.find(version);
  ASSERT_NE(std::string::npos, at);
  edited.replace(at, version.size(), "\"version\": " + std::to_string(kBundleVersion + 1));
  ASSERT_TRUE(WriteFileAtomic(manifest, edited).ok());
  auto scorer = Scorer::Open(bundle);
  ASSERT_FALSE(scorer.ok());
  EXPECT_EQ(StatusCode::kInvalidArgument, scorer.status().code());
  EXPECT_THAT(scorer.status().message(), HasSubstr("version"));
  EXPECT_THAT(scorer.status().message(), HasSubstr(manifest));
}

// A job of ranks' bundle, each rank writing the rows it holds (3 ranks, each
// with the keys of the whole bundle at its index modulo 3), scores the bits
// of the bundle of all the rows; a damaged shard is refused naming its file.
TEST_F(BundleTest, AShardedBundleOfRanksScoresTheBitsOfTheWholeOne) {
  io::Dataset test;
  std::vector<float> expected;
  TrainAndExport("dlrm", Path("whole"), &test, &expected);
  Result<VerifiedBundle> whole = VerifyBundle(Path("whole"));
  ASSERT_TRUE(whole.ok()) << whole.status();
  auto model = NewDenseModel(whole->config.model);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(LoadBundleDense(*whole, **model).ok());
  constexpr int kRanks = 3;
  std::vector<std::unique_ptr<embedding::EmbeddingTable>> shards;
  for (int r = 0; r < kRanks; ++r) {
    auto table = embedding::NewMemoryTable(ServingTableOptions(whole->config));
    ASSERT_TRUE(table.ok()) << table.status();
    shards.push_back(*std::move(table));
  }
  int64_t index = 0;
  Result<int64_t> read = embedding::ReadServingExport(
      Path("whole") + "/embedding", [&](embedding::Key key, const float* vector) {
        embedding::EmbeddingTable& table = *shards[index++ % kRanks];
        std::vector<float> row(table.stored_rows().row_floats(), 0.0f);
        std::copy(vector, vector + whole->config.embedding_dim, row.begin());
        return table.stored_rows().WriteRows({key}, row.data());
      });
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_GT(*read, kRanks);
  test::OnInProcessRanks(kRanks, [&](int r, Communicator& comm) {
    const Status status =
        WriteShardedBundle(Path("sharded"), whole->config, **model, *shards[r], comm);
    EXPECT_TRUE(status.ok()) << "rank " << r << ": " << status;
  });
  Result<VerifiedBundle> sharded = VerifyBundle(Path("sharded"));
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  EXPECT_EQ(kRanks, sharded->embedding_shards);
  EXPECT_EQ(*read, sharded->embedding_rows);
  auto whole_scorer = Scorer::Open(Path("whole"));
  auto sharded_scorer = Scorer::Open(Path("sharded"));
  ASSERT_TRUE(whole_scorer.ok() && sharded_scorer.ok()) << sharded_scorer.status();
  Result<std::vector<float>> want = ScoreAll(**whole_scorer, test);
  Result<std::vector<float>> got = ScoreAll(**sharded_scorer, test);
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_EQ(expected, *want);
  EXPECT_EQ(*want, *got);
  // Every shard's files are in the manifest, with their hashes.
  const std::string shard = Path("sharded") + "/embedding/shard-00002";
  std::string victim;
  for (const auto& entry : std::filesystem::directory_iterator(shard)) {
    if (entry.path().filename().string().starts_with("vectors")) victim = entry.path().string();
  }
  ASSERT_FALSE(victim.empty());
  FlipByte(victim, 20);
  auto damaged = Scorer::Open(Path("sharded"));
  ASSERT_FALSE(damaged.ok());
  EXPECT_EQ(StatusCode::kDataLoss, damaged.status().code());
  EXPECT_THAT(damaged.status().message(), HasSubstr("shard-00002"));
}

// A scorer whose rows exceed its memory budget keeps the rest in a RocksDB
// tier and scores the same bits (the sharded bundle of a job of ranks whose
// table is larger than a host's memory).
TEST_F(BundleTest, AScorerUnderAMemoryBudgetScoresTheBitsOfOneInMemory) {
  io::Dataset test;
  std::vector<float> expected;
  TrainAndExport("deepfm", Path("bundle"), &test, &expected);
  auto in_memory = Scorer::Open(Path("bundle"));
  ASSERT_TRUE(in_memory.ok()) << in_memory.status();
  ScorerOptions options;
  // About one row in each of the memory tier's 64 shards, the least it takes.
  options.memory_budget_bytes = 64 << 10;
  options.disk_path = Path("rows");
  EXPECT_EQ(StatusCode::kInvalidArgument, Scorer::Open(Path("bundle"), options).status().code())
      << "a budget without a table that has a disk tier";
  options.make_table = embedding::NewEmbeddingTable;
  auto budgeted = Scorer::Open(Path("bundle"), options);
  ASSERT_TRUE(budgeted.ok()) << budgeted.status();
  Result<VerifiedBundle> verified = VerifyBundle(Path("bundle"));
  ASSERT_TRUE(verified.ok());
  EXPECT_GE(verified->embedding_rows, 1000) << "the rows must far exceed the memory tier's";
  Result<std::vector<float>> want = ScoreAll(**in_memory, test);
  Result<std::vector<float>> got = ScoreAll(**budgeted, test);
  ASSERT_TRUE(want.ok() && got.ok()) << got.status();
  EXPECT_EQ(*want, *got);
  options.disk_path.clear();
  EXPECT_EQ(StatusCode::kInvalidArgument, Scorer::Open(Path("bundle"), options).status().code());
}

// Ranks without rows still make a bundle; a sharded write stopped before its
// commit fails on every rank alike and leaves nothing at its path.
TEST_F(BundleTest, AShardedWriteStoppedBeforeItsCommitFailsOnEveryRank) {
  const std::string bundle = SmallBundle();
  Result<VerifiedBundle> whole = VerifyBundle(bundle);
  ASSERT_TRUE(whole.ok()) << whole.status();
  auto model = NewDenseModel(whole->config.model);
  ASSERT_TRUE(model.ok());
  std::vector<std::unique_ptr<embedding::EmbeddingTable>> empty;
  for (int r = 0; r < 2; ++r) {
    auto table = embedding::NewMemoryTable(ServingTableOptions(whole->config));
    ASSERT_TRUE(table.ok());
    empty.push_back(*std::move(table));
  }
  test::OnInProcessRanks(2, [&](int r, Communicator& comm) {
    const Status status = WriteShardedBundle(Path("new"), whole->config, **model, *empty[r], comm);
    EXPECT_TRUE(status.ok()) << "rank " << r << ": " << status;
  });
  EXPECT_TRUE(VerifyBundle(Path("new")).ok());
  BundleWriteOptions options;
  options.before_commit = [](const std::string&) { return Status::IOError("stopped"); };
  test::OnInProcessRanks(2, [&](int r, Communicator& comm) {
    const Status status =
        WriteShardedBundle(Path("other"), whole->config, **model, *empty[r], comm, options);
    EXPECT_EQ(StatusCode::kIOError, status.code()) << "rank " << r << ": " << status;
  });
  EXPECT_FALSE(std::filesystem::exists(Path("other")));
}

TEST_F(BundleTest, ADirectoryThatIsNotABundleIsNeverReplaced) {
  std::filesystem::create_directories(Path("precious"));
  ASSERT_TRUE(WriteFileAtomic(Path("precious/notes.txt"), "keep me").ok());
  auto trainer = Trainer::Create(SmallOptions("dlrm"), 4, 6, 1);
  ASSERT_TRUE(trainer.ok());
  const BundleConfig config = BundleConfigOf((*trainer)->options(), {}, true, 0);
  const Status status =
      WriteBundle(Path("precious"), config, (*trainer)->model(), (*trainer)->table());
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_TRUE(FileExists(Path("precious/notes.txt")));
}

TEST_F(BundleTest, InputOfAnotherShapeIsRefused) {
  const std::string bundle = SmallBundle();
  auto scorer = Scorer::Open(bundle);
  ASSERT_TRUE(scorer.ok()) << scorer.status();
  io::Batch batch;
  batch.Clear(3, 6);
  batch.size = 1;
  batch.dense = {0, 0, 0};
  batch.offsets.assign(7, 0);
  std::vector<float> scores;
  const Status status = (*scorer)->Score(batch, &scores);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("3 dense features"));
}

}  // namespace
}  // namespace ember::engine
