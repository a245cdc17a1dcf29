#include "io/synthetic.h"

#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/file.h"
#include "core/json.h"
#include "io/columnar.h"
#include "io/criteo.h"
#include "io/format_spec.h"
#include "tests/io/text_fixture.h"
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

  // 3 dense, 5 slots of vocabularies 2, 3, 50, 60 and 70, the last two
  // multi-hot with bags of 0 to 4 ids.
  static SyntheticOptions MultiHotOptions(SyntheticFormat format) {
    SyntheticOptions options;
    options.rows = 12000;
    options.num_dense = 3;
    options.num_slots = 5;
    options.slot_vocabularies = {2, 3, 50, 60, 70};
    options.interacting_slots = 4;
    options.multi_hot_slots = 2;
    options.max_bag_size = 4;
    options.format = format;
    return options;
  }

  // Reads the csv output of `options` at `path` as its meta file says.
  static Result<Dataset> ReadCsvOutput(const std::string& path, const SyntheticOptions& options) {
    FormatSpec spec;
    spec.name = "csv";
    spec.schema = SyntheticCsvSchema(options);
    spec.header = true;
    spec.slot_bits = options.slot_bits;
    EMBER_ASSIGN_OR_RETURN(auto format, MakeTextFormat(spec));
    TextReadOptions strict;
    strict.bad_lines = BadLinePolicy::kFail;
    return ReadTextFiles({path}, *format, strict);
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

// Clusters change only the rows' cluster features and probabilities; the
// cluster-blind AUC (every cluster's teacher network replaced by their mean)
// is below the ceiling and is recorded.
TEST_F(SyntheticTest, ClustersAreWorthAucAndLeaveTheOtherFeaturesAlone) {
  SyntheticOptions plain = SmallOptions();
  plain.format = SyntheticFormat::kCsv;
  plain.interaction_scale = 0.4;
  SyntheticOptions clustered = plain;
  clustered.num_clusters = 4;
  Result<SyntheticInfo> a = WriteSynthetic(Path("plain.csv"), plain);
  Result<SyntheticInfo> b = WriteSynthetic(Path("clustered.csv"), clustered);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(0.0, a->cluster_blind_auc);
  EXPECT_GT(b->bayes_auc, b->cluster_blind_auc + 0.03);
  EXPECT_GT(b->cluster_blind_auc, 0.5);
  EXPECT_THAT(*ReadFile(Path("clustered.csv.meta.json")), HasSubstr("\"cluster_blind_auc\""));
  Result<Dataset> x = ReadCsvOutput(Path("plain.csv"), plain);
  Result<Dataset> y = ReadCsvOutput(Path("clustered.csv"), clustered);
  ASSERT_TRUE(x.ok() && y.ok());
  ASSERT_EQ(x->size(), y->size());
  // Dense features 0 and 1 place a row in its cluster; the rest are drawn
  // alike.
  const int dense = x->num_dense();
  for (int64_t row = 0; row < x->size(); ++row) {
    for (int j = 2; j < dense; ++j) {
      ASSERT_EQ(x->all().dense[row * dense + j], y->all().dense[row * dense + j]) << row;
    }
  }
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
  options.format = SyntheticFormat::kCsv;
  std::vector<int64_t> reports;
  Result<SyntheticInfo> info = WriteSynthetic(
      Path("a.csv"), options, [&](int64_t rows_done) { reports.push_back(rows_done); });
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

// The first generator's rows for seed 1: the default options must keep
// giving them (and so the demo's AUC).
TEST_F(SyntheticTest, DefaultOptionsKeepTheFirstGeneratorsRows) {
  SyntheticOptions options;
  options.rows = 2;
  ASSERT_TRUE(WriteSyntheticCriteo(Path("a.tsv"), options).ok());
  EXPECT_EQ(
      "1\t0\t4\t18\t\t34\t2\t6\t31\t3\t0\t0\t0\t25\ta8e60d2e\ta18818d3\tb"
      "a9f56d3\t8ca4cb6f\t"
      "568d19eb\tf523d6cf\t08271c6d\tf7bfcb58\t392cbdd2\tc8c0cf7f\t785f47"
      "96\t0939d222\t0c150db4\t"
      "28137a22\t95f214b9\tf4f3f642\tbccc0793\tb429e21a\t49e6b715\t998cf9"
      "5e\td4ff72d9\t9a9e7257\t"
      "06466e1a\t9d7122e8\t71fce2ee\tf6f5ec28\n"
      "0\t14\t2\t13\t0\t1\t0\t16\t10\t7\t\t\t0\t28\t123b195a\t74e130f9\tb"
      "7ae4bb8\tb5fbfcce\t"
      "ea102dad\tc683e215\t5fd2b875\t1eabdddd\t871bc3f2\t8bd6bf0e\t6c9bd7"
      "1e\t0812859c\tac16824a\t"
      "f10706da\t9ac13dd0\t6391ffec\tfe2d4121\tc5565c0c\t9ba97d8c\t5f3a69"
      "d2\t77085711\t786b2f0e\t"
      "2f8b4f99\tf6216668\t953c1cfd\t57bbe0d5\n",
      *ReadFile(Path("a.tsv")));
}

TEST_F(SyntheticTest, CsvOutputHasTheShapeBagsAndVocabulariesAsked) {
  const SyntheticOptions options = MultiHotOptions(SyntheticFormat::kCsv);
  EXPECT_EQ("label,1-3=dense,4-6=cat,7-8=multi", SyntheticCsvSchema(options));
  Result<SyntheticInfo> info = WriteSynthetic(Path("a.csv"), options);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_THAT(*ReadFile(Path("a.csv")), ::testing::StartsWith("label,I1,I2,I3,C1,C2,C3,C4,C5\n"));
  Result<Dataset> data = ReadCsvOutput(Path("a.csv"), options);
  ASSERT_TRUE(data.ok()) << data.status();
  const Batch& all = data->all();
  ASSERT_EQ(12000, all.size);
  EXPECT_EQ(3, all.num_dense);
  EXPECT_EQ(5, all.num_slots);
  EXPECT_EQ(1, all.num_labels);
  EXPECT_DOUBLE_EQ(info->positive_rate, CountPositives(all) / 12000.0);
  std::vector<std::set<Key>> distinct(5);
  std::vector<int> bags_of_size(5, 0);
  for (int64_t i = 0; i < all.size; ++i) {
    for (int s = 0; s < 5; ++s) {
      const int64_t size = all.BagSize(i, s);
      if (s < 3) {
        ASSERT_EQ(1, size) << "row " << i << " slot " << s;
      } else {
        ASSERT_LE(size, 4) << "row " << i << " slot " << s;
        ++bags_of_size[size];
      }
      for (const Key key : BagKeys(all, i, s)) distinct[s].insert(key);
    }
  }
  // Bag sizes are uniform in [0, 4]: 24000 bags, about 4800 of each size.
  for (int size = 0; size <= 4; ++size) EXPECT_GT(bags_of_size[size], 4000) << size;
  EXPECT_EQ(2u, distinct[0].size());
  EXPECT_EQ(3u, distinct[1].size());
  EXPECT_LE(distinct[2].size(), 50u);
  EXPECT_GT(distinct[2].size(), 25u);
  EXPECT_LE(distinct[4].size(), 70u);
  EXPECT_GT(info->bayes_auc, 0.5);
  EXPECT_LT(info->bayes_auc, 1.0);
}

TEST_F(SyntheticTest, ColumnarOutputHoldsTheBatchesOfTheCsvOutput) {
  const SyntheticOptions csv = MultiHotOptions(SyntheticFormat::kCsv);
  const SyntheticOptions columnar = MultiHotOptions(SyntheticFormat::kColumnar);
  Result<SyntheticInfo> csv_info = WriteSynthetic(Path("a.csv"), csv);
  Result<SyntheticInfo> col_info = WriteSynthetic(Path("a.col"), columnar);
  ASSERT_TRUE(csv_info.ok()) << csv_info.status();
  ASSERT_TRUE(col_info.ok()) << col_info.status();
  EXPECT_EQ(csv_info->bayes_auc, col_info->bayes_auc);
  Result<Dataset> text = ReadCsvOutput(Path("a.csv"), csv);
  Result<Dataset> binary = ReadColumnarDataset(Path("a.col"));
  ASSERT_TRUE(text.ok()) << text.status();
  ASSERT_TRUE(binary.ok()) << binary.status();
  ExpectSameBatch(text->all(), binary->all());
  Result<double> auc = ReadSyntheticBayesAuc(Path("a.col"));
  ASSERT_TRUE(auc.ok()) << auc.status();
  EXPECT_NEAR(col_info->bayes_auc, *auc, 1e-9);
  EXPECT_THAT(*ReadFile(Path("a.col.meta.json")), HasSubstr("\"format\": \"columnar\""));
  EXPECT_THAT(*ReadFile(Path("a.csv.meta.json")),
              HasSubstr("--format=csv --header --schema=label,1-3=dense,4-6=cat,7-8=multi"));
}

TEST_F(SyntheticTest, ColumnarOutputOfCriteoShapeHoldsTheBatchesOfTheCriteoOutput) {
  SyntheticOptions options = SmallOptions();
  options.rows = 5000;
  options.slot_bits = 12;
  ASSERT_TRUE(WriteSyntheticCriteo(Path("a.tsv"), options).ok());
  options.format = SyntheticFormat::kColumnar;
  ASSERT_TRUE(WriteSynthetic(Path("a.col"), options).ok());
  CriteoReadOptions read;
  read.slot_bits = 12;
  Result<Dataset> text = ReadCriteoFiles({Path("a.tsv")}, read);
  Result<std::unique_ptr<ColumnarFile>> file = OpenColumnar(Path("a.col"));
  ASSERT_TRUE(text.ok() && file.ok());
  EXPECT_EQ(12, (*file)->shape().slot_bits);
  Batch binary;
  ASSERT_TRUE((*file)->ReadRows(0, (*file)->rows(), &binary).ok());
  ExpectSameBatch(text->all(), binary);
}

TEST_F(SyntheticTest, EveryFormatIsDeterministicBySeed) {
  for (const SyntheticFormat format : {SyntheticFormat::kCsv, SyntheticFormat::kColumnar}) {
    SCOPED_TRACE(SyntheticFormatName(format));
    SyntheticOptions options = MultiHotOptions(format);
    options.rows = 3000;
    ASSERT_TRUE(WriteSynthetic(Path("a"), options).ok());
    ASSERT_TRUE(WriteSynthetic(Path("b"), options).ok());
    options.seed = 7;
    ASSERT_TRUE(WriteSynthetic(Path("c"), options).ok());
    EXPECT_EQ(*ReadFile(Path("a")), *ReadFile(Path("b")));
    EXPECT_NE(*ReadFile(Path("a")), *ReadFile(Path("c")));
  }
}

TEST_F(SyntheticTest, MultiTaskOutputAddsLabelsWithoutChangingTheClickTask) {
  SyntheticOptions one = MultiHotOptions(SyntheticFormat::kCsv);
  SyntheticOptions three = one;
  three.num_tasks = 3;
  EXPECT_EQ("0-2=label,3-5=dense,6-8=cat,9-10=multi", SyntheticCsvSchema(three));
  Result<SyntheticInfo> one_info = WriteSynthetic(Path("one.csv"), one);
  Result<SyntheticInfo> three_info = WriteSynthetic(Path("three.csv"), three);
  ASSERT_TRUE(one_info.ok()) << one_info.status();
  ASSERT_TRUE(three_info.ok()) << three_info.status();
  EXPECT_THAT(*ReadFile(Path("three.csv")), ::testing::StartsWith("label,label2,label3,I1,"));
  Result<Dataset> a = ReadCsvOutput(Path("one.csv"), one);
  Result<Dataset> b = ReadCsvOutput(Path("three.csv"), three);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(3, b->all().num_labels);
  ASSERT_EQ(a->all().size, b->all().size);
  // Task 0 and the features are those of the single-task file.
  EXPECT_EQ(a->all().keys, b->all().keys);
  EXPECT_EQ(a->all().dense, b->all().dense);
  int64_t differ = 0;
  for (int64_t i = 0; i < a->all().size; ++i) {
    ASSERT_EQ(a->all().labels[i], b->all().labels[i * 3]) << "row " << i;
    differ += b->all().labels[i * 3 + 1] != b->all().labels[i * 3];
  }
  // The tasks are related, not equal.
  EXPECT_GT(differ, a->all().size / 20);
  EXPECT_EQ(one_info->bayes_auc, three_info->bayes_auc);
  ASSERT_EQ(3u, three_info->task_bayes_auc.size());
  EXPECT_EQ(three_info->bayes_auc, three_info->task_bayes_auc[0]);
  for (const double auc : three_info->task_bayes_auc) {
    EXPECT_GT(auc, 0.6);
    EXPECT_LT(auc, 1.0);
  }
  Result<std::vector<double>> read = ReadSyntheticTaskBayesAuc(Path("three.csv"));
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(3u, read->size());
  for (int t = 0; t < 3; ++t) EXPECT_NEAR(three_info->task_bayes_auc[t], (*read)[t], 1e-9);

  // Columnar output holds the same three labels.
  three.format = SyntheticFormat::kColumnar;
  ASSERT_TRUE(WriteSynthetic(Path("three.col"), three).ok());
  Result<Dataset> col = ReadColumnarDataset(Path("three.col"));
  ASSERT_TRUE(col.ok()) << col.status();
  ExpectSameBatch(b->all(), col->all());
}

TEST_F(SyntheticTest, TaskCountsOutOfRangeOrInCriteoAreRefused) {
  SyntheticOptions options = SmallOptions();
  options.num_tasks = 2;
  Status status = WriteSyntheticCriteo(Path("a.tsv"), options).status();
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("criteo format holds one label"));
  options.format = SyntheticFormat::kCsv;
  options.num_slots = 3;
  options.num_dense = 1;
  options.interacting_slots = 2;
  options.num_tasks = 0;
  status = WriteSynthetic(Path("a.csv"), options).status();
  EXPECT_THAT(status.message(), HasSubstr("num_tasks must be in [1, 16]"));
  EXPECT_FALSE(FileExists(Path("a.csv")));
}

TEST_F(SyntheticTest, CriteoFormatRefusesOtherShapes) {
  SyntheticOptions options = MultiHotOptions(SyntheticFormat::kCriteo);
  const Status status = WriteSynthetic(Path("a.tsv"), options).status();
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("criteo format holds 13 dense and 26"));
  EXPECT_FALSE(FileExists(Path("a.tsv")));
}

TEST(SyntheticFormatTest, ParsesTheNamesItPrints) {
  for (const SyntheticFormat format :
       {SyntheticFormat::kCriteo, SyntheticFormat::kCsv, SyntheticFormat::kColumnar}) {
    EXPECT_EQ(format, *ParseSyntheticFormat(SyntheticFormatName(format)));
  }
  EXPECT_EQ(StatusCode::kInvalidArgument, ParseSyntheticFormat("tsv").status().code());
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
      {"slot_vocabularies",
       [](SyntheticOptions *o) {
         o->slot_vocabularies = {5, 6};
       }},
      {"slot_vocabularies",
       [](SyntheticOptions *o) { o->slot_vocabularies = std::vector<int64_t>(26, 0); }},
      {"multi_hot_slots", [](SyntheticOptions *o) { o->multi_hot_slots = 27; }},
      {"max_bag_size", [](SyntheticOptions *o) { o->max_bag_size = 0; }},
      {"slot_bits", [](SyntheticOptions *o) { o->slot_bits = 4; }},
      {"criteo format", [](SyntheticOptions *o) { o->num_dense = 2; }},
      {"num_clusters", [](SyntheticOptions *o) { o->num_clusters = 17; }},
      {"num_clusters",
       [](SyntheticOptions *o) {
         o->format = SyntheticFormat::kCsv;
         o->num_dense = 1;
         o->num_clusters = 3;
       }},
      {"cluster_units", [](SyntheticOptions *o) { o->cluster_units = 0; }},
      {"cluster_scale", [](SyntheticOptions *o) { o->cluster_scale = -1; }},
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

// The meta file `ember gen-data --out_format=csv --tasks=2` wrote before
// nlohmann (tests/io/testdata).
TEST(SyntheticMetaTest, AMetaFileWrittenByTheOlderWriterGivesItsAucs) {
  const std::string data = std::string(EMBER_IO_TESTDATA) + "/synthetic_two_tasks.csv";
  Result<double> auc = ReadSyntheticBayesAuc(data);
  ASSERT_TRUE(auc.ok()) << auc.status();
  EXPECT_EQ(0.8432688512, *auc);
  Result<std::vector<double>> aucs = ReadSyntheticTaskBayesAuc(data);
  ASSERT_TRUE(aucs.ok()) << aucs.status();
  EXPECT_EQ((std::vector<double>{0.8432688512, 0.7792344786}), *aucs);
}

TEST_F(SyntheticTest, AMetaFileWithAMissingOrUnknownFieldIsAnErrorNamingIt) {
  ASSERT_TRUE(WriteSyntheticCriteo(Path("a.tsv"), SmallOptions()).ok());
  Result<std::string> text = ReadFile(Path("a.tsv.meta.json"));
  ASSERT_TRUE(text.ok()) << text.status();
  Result<Json> json = ParseJsonText(*text);
  ASSERT_TRUE(json.ok()) << json.status();
  Json edited = *json;
  edited["info"].erase("bayes_auc");
  ASSERT_TRUE(WriteFileAtomic(Path("b.tsv.meta.json"), edited.dump(2)).ok());
  EXPECT_EQ(Path("b.tsv.meta.json") + ": field \"info.bayes_auc\" is missing",
            ReadSyntheticBayesAuc(Path("b.tsv")).status().message());
  edited = *json;
  edited["options"]["zipf"] = 1.1;
  ASSERT_TRUE(WriteFileAtomic(Path("b.tsv.meta.json"), edited.dump(2)).ok());
  EXPECT_EQ(Path("b.tsv.meta.json") + ": field \"options.zipf\" is not a known field",
            ReadSyntheticTaskBayesAuc(Path("b.tsv")).status().message());
  // One task: a meta file from before there were more.
  edited = *json;
  edited["info"].erase("task_bayes_auc");
  ASSERT_TRUE(WriteFileAtomic(Path("b.tsv.meta.json"), edited.dump(2)).ok());
  Result<std::vector<double>> aucs = ReadSyntheticTaskBayesAuc(Path("b.tsv"));
  ASSERT_TRUE(aucs.ok()) << aucs.status();
  EXPECT_EQ(std::vector<double>{(*json)["info"]["bayes_auc"].get<double>()}, *aucs);
}

}  // namespace
}  // namespace ember::io
