#include "io/synthetic.h"

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/file.h"
#include "io/criteo.h"
#include "tests/testing/temp_dir.h"

namespace ember::io {
namespace {

using ::testing::HasSubstr;

class SyntheticTest : public test::TempDirTest {
 protected:

  static SyntheticOptions SmallOptions() {
    SyntheticOptions options;
    options.rows = 20000;
    return options;
  }

};

TEST_F(SyntheticTest, SameSeedWritesTheSameBytesAndAnotherSeedDifferentBytes) {
  SyntheticOptions options = SmallOptions();
  ASSERT_TRUE(WriteSyntheticCriteo(Path("a.tsv"), options).ok());
  ASSERT_TRUE(WriteSyntheticCriteo(Path("b.tsv"), options).ok());
  options.seed = 2;
  ASSERT_TRUE(WriteSyntheticCriteo(Path("c.tsv"), options).ok());
  const std::string a = *ReadFile(Path("a.tsv"));
  EXPECT_EQ(a, *ReadFile(Path("b.tsv")));
  EXPECT_EQ(*ReadFile(Path("a.tsv.meta.json")), *ReadFile(Path("b.tsv.meta.json")));
  EXPECT_NE(a, *ReadFile(Path("c.tsv")));
}

TEST_F(SyntheticTest, RowsDoNotDependOnHowManyRowsAreWritten) {
  SyntheticOptions options = SmallOptions();
  ASSERT_TRUE(WriteSyntheticCriteo(Path("long.tsv"), options).ok());
  options.rows = 100;
  ASSERT_TRUE(WriteSyntheticCriteo(Path("short.tsv"), options).ok());
  const std::string short_text = *ReadFile(Path("short.tsv"));
  EXPECT_EQ(short_text, ReadFile(Path("long.tsv"))->substr(0, short_text.size()));
}

TEST_F(SyntheticTest, MetaRecordsABayesAucBetweenHalfAndOne) {
  Result<SyntheticInfo> info = WriteSyntheticCriteo(Path("a.tsv"), SmallOptions());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_GT(info->bayes_auc, 0.5);
  EXPECT_LT(info->bayes_auc, 1.0);
  EXPECT_GT(info->bayes_logloss, 0.0);
  Result<double> auc = ReadSyntheticBayesAuc(Path("a.tsv"));
  ASSERT_TRUE(auc.ok()) << auc.status();
  EXPECT_NEAR(info->bayes_auc, *auc, 1e-9);
  const std::string meta = *ReadFile(Path("a.tsv.meta.json"));
  EXPECT_THAT(meta, HasSubstr("\"positive_rate\""));
  EXPECT_THAT(meta, HasSubstr("\"zipf_exponent\""));
}

TEST_F(SyntheticTest, DefaultsGiveACriteoLikeClickRateAndAuc) {
  SyntheticOptions options;
  options.rows = 50000;
  Result<SyntheticInfo> info = WriteSyntheticCriteo(Path("a.tsv"), options);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_GT(info->positive_rate, 0.15);
  EXPECT_LT(info->positive_rate, 0.35);
  EXPECT_GT(info->bayes_auc, 0.7);
  EXPECT_LT(info->bayes_auc, 0.9);
}

TEST_F(SyntheticTest, GeneratedFileReadsBackAsCriteoWithoutBadLines) {
  Result<SyntheticInfo> info = WriteSyntheticCriteo(Path("a.tsv"), SmallOptions());
  ASSERT_TRUE(info.ok()) << info.status();
  CriteoReadOptions read_options;
  read_options.bad_lines = BadLinePolicy::kFail;
  Result<Dataset> data = ReadCriteoFiles({Path("a.tsv")}, read_options);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(20000, data->size());
  EXPECT_EQ(0, data->bad_lines().bad_lines);
  int64_t positives = 0;
  for (const float label : data->all().labels) positives += label == 1.0f ? 1 : 0;
  EXPECT_DOUBLE_EQ(info->positive_rate, positives / 20000.0);
  // Some dense values are missing, and the Zipf head makes ids repeat.
  int64_t zeros = 0;
  for (const float value : data->all().dense) zeros += value == 0.0f ? 1 : 0;
  EXPECT_GT(zeros, 0);
}

TEST_F(SyntheticTest, ProgressIsReportedInOrderUpToAllRows) {
  SyntheticOptions options = SmallOptions();
  options.rows = 250000;
  options.num_dense = 2;
  options.num_slots = 3;
  options.interacting_slots = 2;
  std::vector<int64_t> reports;
  Result<SyntheticInfo> info = WriteSyntheticCriteo(
      Path("a.tsv"), options, [&](int64_t rows_done) { reports.push_back(rows_done); });
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_GE(reports.size(), 3u);
  EXPECT_TRUE(std::is_sorted(reports.begin(), reports.end()));
  EXPECT_EQ(250000, reports.back());
}

TEST_F(SyntheticTest, WritesLeaveNoTemporaryFiles) {
  ASSERT_TRUE(WriteSyntheticCriteo(Path("a.tsv"), SmallOptions()).ok());
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ((std::vector<std::string>{"a.tsv", "a.tsv.meta.json"}), names);
}

TEST_F(SyntheticTest, UnwritableDirectoryIsIOError) {
  Result<SyntheticInfo> info = WriteSyntheticCriteo(Path("no/such/dir/a.tsv"), SmallOptions());
  EXPECT_EQ(StatusCode::kIOError, info.status().code());
}

TEST_F(SyntheticTest, BayesAucOfMissingMetaIsNotFound) {
  EXPECT_EQ(StatusCode::kNotFound, ReadSyntheticBayesAuc(Path("none.tsv")).status().code());
}

struct InvalidCase {
  const char* field;
  void (*apply)(SyntheticOptions*);
};

TEST(SyntheticOptionsTest, InvalidOptionsAreRejectedNamingTheField) {
  const InvalidCase cases[] = {
      {"rows", [](SyntheticOptions* o) { o->rows = 0; }},
      {"num_dense", [](SyntheticOptions* o) { o->num_dense = -1; }},
      {"num_dense", [](SyntheticOptions* o) { o->num_dense = 65; }},
      {"num_slots", [](SyntheticOptions* o) { o->num_slots = 0; }},
      {"num_slots", [](SyntheticOptions* o) { o->num_slots = 1024; }},
      {"vocabulary", [](SyntheticOptions* o) { o->vocabulary = 0; }},
      {"zipf_exponent", [](SyntheticOptions* o) { o->zipf_exponent = 0.0; }},
      {"id_weight_scale", [](SyntheticOptions* o) { o->id_weight_scale = -1.0; }},
      {"latent_rank", [](SyntheticOptions* o) { o->latent_rank = -1; }},
      {"interacting_slots", [](SyntheticOptions* o) { o->interacting_slots = 27; }},
      {"interaction_scale", [](SyntheticOptions* o) { o->interaction_scale = -0.1; }},
      {"vocabulary", [](SyntheticOptions* o) { o->vocabulary = int64_t{1} << 30; }},
  };
  EXPECT_TRUE(ValidateSyntheticOptions(SyntheticOptions()).ok());
  for (const InvalidCase& c : cases) {
    SyntheticOptions options;
    c.apply(&options);
    const Status status = ValidateSyntheticOptions(options);
    EXPECT_EQ(StatusCode::kInvalidArgument, status.code()) << c.field;
    EXPECT_THAT(status.message(), HasSubstr(c.field));
  }
}

}  // namespace
}  // namespace ember::io
