#include "io/criteo.h"

#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/file.h"
#include "io/feature_hash.h"
#include "tests/io/text_fixture.h"
#include "tests/testing/temp_dir.h"

namespace ember::io {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kSamplePath[] = EMBER_SHARED_DATA_DIR "/criteo/criteo_kaggle_8k.tsv";

std::string CategoricalValue(int slot) { return std::string("c").append(std::to_string(slot)); }

// A Criteo line with dense value i+1 and categorical value "c<slot>", with
// `label` and overrides for single fields (index into the 40 columns).
std::string Line(const std::string& label = "1",
                 const std::vector<std::pair<int, std::string>>& overrides = {}) {
  std::vector<std::string> fields(kCriteoColumns);
  fields[0] = label;
  for (int j = 0; j < kCriteoDense; ++j) fields[1 + j] = std::to_string(j + 1);
  for (int s = 0; s < kCriteoSlots; ++s) {
    fields[1 + kCriteoDense + s] = CategoricalValue(s);
  }
  for (const auto& [index, value] : overrides) fields[index] = value;
  std::string line;
  for (int i = 0; i < kCriteoColumns; ++i) {
    if (i > 0) line.push_back('\t');
    line.append(fields[i]);
  }
  return line;
}

// `n` distinct valid lines, each ending in '\n'.
std::string ValidLines(int n) {
  std::string text;
  for (int i = 0; i < n; ++i) {
    text += Line(i % 3 == 0 ? "1" : "0", {{2, std::to_string(i)}, {20, std::to_string(i % 97)}});
    text += "\n";
  }
  return text;
}

class CriteoTest : public TextFormatTest {};

TEST_F(CriteoTest, ValidLineGivesLabelTransformedDenseAndOneKeyPerSlot) {
  const std::string path = Write("a.tsv", Line("1") + "\n");
  Result<Dataset> data = ReadCriteoFiles({path}, {});
  ASSERT_TRUE(data.ok()) << data.status();
  const Batch& all = data->all();
  ASSERT_EQ(1, all.size);
  EXPECT_EQ(kCriteoDense, all.num_dense);
  EXPECT_EQ(kCriteoSlots, all.num_slots);
  EXPECT_EQ(std::vector<float>{1.0f}, all.labels);
  for (int j = 0; j < kCriteoDense; ++j) EXPECT_FLOAT_EQ(LogTransform(j + 1), all.dense[j]);
  for (int s = 0; s < kCriteoSlots; ++s) {
    EXPECT_EQ(1, all.BagSize(0, s));
    EXPECT_EQ(HashCategorical(s, CategoricalValue(s)), all.keys[s]);
  }
  EXPECT_EQ(1, data->bad_lines().lines_read);
  EXPECT_EQ(0, data->bad_lines().bad_lines);
}

TEST_F(CriteoTest, EmptyFieldsAreMissingValues) {
  // The real logs end many lines in empty fields: "\t\t".
  const std::string line = Line("0", {{1, ""}, {13, ""}, {14, ""}, {39, ""}, {38, ""}});
  const std::string path = Write("a.tsv", line + "\n");
  Result<Dataset> data = ReadCriteoFiles({path}, {});
  ASSERT_TRUE(data.ok()) << data.status();
  const Batch& all = data->all();
  ASSERT_EQ(1, all.size);
  EXPECT_EQ(0.0f, all.labels[0]);
  EXPECT_EQ(0.0f, all.dense[0]);
  EXPECT_EQ(0.0f, all.dense[12]);
  EXPECT_EQ(HashCategorical(0, ""), all.keys[0]);
  EXPECT_EQ(HashCategorical(24, ""), all.keys[24]);
  EXPECT_EQ(HashCategorical(25, ""), all.keys[25]);
  EXPECT_EQ(HashCategorical(1, "c1"), all.keys[1]);
}

TEST_F(CriteoTest, NegativeIntegersAreValidAndTransformToZero) {
  const std::string path = Write("a.tsv", Line("1", {{2, "-2"}, {3, "-1"}}) + "\n");
  Result<Dataset> data = ReadCriteoFiles({path}, {});
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(0, data->bad_lines().bad_lines);
  EXPECT_EQ(0.0f, data->all().dense[1]);
  EXPECT_EQ(0.0f, data->all().dense[2]);
}

struct LayoutCase {
  const char* name;
  std::string text;
};

TEST_F(CriteoTest, LineEndingsAndTrailingBlankLinesDoNotChangeTheData) {
  const std::string a = Line("1");
  const std::string b = Line("0", {{39, ""}});
  const std::string reference = a + "\n" + b + "\n";
  const LayoutCase cases[] = {
      {"crlf", a + "\r\n" + b + "\r\n"},
      {"no final newline", a + "\n" + b},
      {"crlf without final newline", a + "\r\n" + b},
      {"trailing blank lines", reference + "\n\n"},
      {"trailing crlf blank lines", a + "\r\n" + b + "\r\n\r\n\r\n"},
  };
  Result<Dataset> expected = ReadCriteoFiles({Write("reference.tsv", reference)}, {});
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_EQ(2, expected->size());
  for (const LayoutCase& c : cases) {
    SCOPED_TRACE(c.name);
    Result<Dataset> data = ReadCriteoFiles({Write("case.tsv", c.text)}, {});
    ASSERT_TRUE(data.ok()) << data.status();
    ExpectSameBatch(expected->all(), data->all());
    EXPECT_EQ(2, data->bad_lines().lines_read);
    EXPECT_EQ(0, data->bad_lines().bad_lines);
  }
}

TEST_F(CriteoTest, EmptyFileGivesAnEmptyDataset) {
  Result<Dataset> data = ReadCriteoFiles({Write("empty.tsv", "")}, {});
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(0, data->size());
  EXPECT_EQ(kCriteoSlots, data->num_slots());
}

struct BadLineCase {
  const char* reason;
  std::string line;
  const char* got;  // Part of the message.
};

std::vector<BadLineCase> BadLineCases() {
  std::string too_long = Line("1", {{30, std::string((1 << 20) + 10, 'a')}});
  return {
      {"column count", Line("1").substr(0, Line("1").rfind('\t')), "39 columns"},
      {"column count", Line("1") + "\textra", "41 columns"},
      {"column count", "", "1 columns"},
      {"bad label", Line("2"), "\"2\""},
      {"bad label", Line(""), "\"\""},
      {"bad label", Line("0.5"), "\"0.5\""},
      {"unparsable integer", Line("1", {{3, "12a"}}), "I3=\"12a\""},
      {"unparsable integer", Line("1", {{1, "1.5"}}), "I1=\"1.5\""},
      {"unparsable integer", Line("1", {{13, "99999999999999999999"}}), "I13="},
      {"unparsable integer", Line("1", {{5, " 7"}}), "I5=\" 7\""},
      {"line too long", too_long, "bytes"},
      // A NUL inside a categorical value would hash as a feature; it is not text.
      {"binary data", Line("1", {{20, std::string("ab\0cd", 5)}}), "a NUL byte at byte"},
      // Control bytes are quoted escaped, never printed raw.
      {"unparsable integer", Line("1", {{3, "1\x1b[2J"}}), "I3=\"1\\x1b[2J\""},
  };
}

TEST_F(CriteoTest, BadLinesAreCountedByReasonWhenSkipped) {
  CriteoReadOptions options;
  options.bad_lines = BadLinePolicy::kSkip;
  options.max_bad_ratio = 1.0;
  for (const BadLineCase& c : BadLineCases()) {
    SCOPED_TRACE(std::string(c.reason) + " got " + c.got);
    const std::string path = Write("bad.tsv", Line("1") + "\n" + c.line + "\n" + Line("0") + "\n");
    Result<Dataset> data = ReadCriteoFiles({path}, options);
    ASSERT_TRUE(data.ok()) << data.status();
    EXPECT_EQ(2, data->size());
    EXPECT_EQ((std::vector<float>{1.0f, 0.0f}), data->all().labels);
    const BadLineReport& report = data->bad_lines();
    EXPECT_EQ(3, report.lines_read);
    EXPECT_EQ(1, report.bad_lines);
    EXPECT_EQ((std::map<std::string, int64_t>{{c.reason, 1}}), report.by_reason);
    ASSERT_EQ(1u, report.first_examples.size());
    EXPECT_THAT(report.first_examples[0], StartsWith(path + ":2: " + c.reason));
    EXPECT_THAT(report.first_examples[0], HasSubstr(c.got));
  }
}

TEST_F(CriteoTest, BadLineFailsTheReadWithFileAndLineWhenPolicyIsFail) {
  CriteoReadOptions options;
  options.bad_lines = BadLinePolicy::kFail;
  for (const BadLineCase& c : BadLineCases()) {
    SCOPED_TRACE(std::string(c.reason) + " got " + c.got);
    const std::string path = Write("bad.tsv", Line("1") + "\n" + c.line + "\n" + Line("0") + "\n");
    Result<Dataset> data = ReadCriteoFiles({path}, options);
    ASSERT_FALSE(data.ok());
    EXPECT_EQ(StatusCode::kInvalidArgument, data.status().code());
    EXPECT_THAT(data.status().message(), StartsWith(path + ":2: " + c.reason + " (got "));
    EXPECT_THAT(data.status().message(), HasSubstr(c.got));
  }
}

TEST_F(CriteoTest, BlankLineInsideTheFileIsABadLine) {
  CriteoReadOptions options;
  options.max_bad_ratio = 1.0;
  const std::string path = Write("a.tsv", Line("1") + "\n\n" + Line("0") + "\n");
  Result<Dataset> data = ReadCriteoFiles({path}, options);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(2, data->size());
  EXPECT_EQ(1, data->bad_lines().by_reason.at("column count"));
}

TEST_F(CriteoTest, SkipFailsWhenTheBadRatioIsOverTheLimit) {
  CriteoReadOptions options;
  options.max_bad_ratio = 0.1;
  // 2 bad of 10 lines: 0.2 > 0.1.
  std::string text = ValidLines(8) + Line("x") + "\n" + Line("y") + "\n";
  Result<Dataset> data = ReadCriteoFiles({Write("a.tsv", text)}, options);
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(StatusCode::kInvalidArgument, data.status().code());
  EXPECT_THAT(data.status().message(), HasSubstr("max_bad_ratio"));
  EXPECT_THAT(data.status().message(), HasSubstr("a.tsv:9: bad label"));

  options.max_bad_ratio = 0.2;
  data = ReadCriteoFiles({Write("a.tsv", text)}, options);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(8, data->size());
}

TEST_F(CriteoTest, OnlyTheFirstFiveBadLinesAreKeptAsExamples) {
  CriteoReadOptions options;
  options.max_bad_ratio = 1.0;
  std::string text;
  for (int i = 0; i < 8; ++i) text += Line("7") + "\n";
  Result<Dataset> data = ReadCriteoFiles({Write("a.tsv", text)}, options);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(8, data->bad_lines().bad_lines);
  ASSERT_EQ(5u, data->bad_lines().first_examples.size());
  EXPECT_THAT(data->bad_lines().first_examples[4], HasSubstr("a.tsv:5: bad label"));
}

TEST_F(CriteoTest, LineNumbersStayRightAcrossParallelPieces) {
  // About 5 MiB: several pieces parsed on different threads.
  const int kLines = 25000;
  std::string text;
  for (int i = 1; i <= kLines; ++i) {
    text += (i == 1 || i == 7777 || i == kLines ? Line("9") : Line("1", {{5, std::to_string(i)}}));
    text += "\n";
  }
  CriteoReadOptions options;
  options.threads = 4;
  options.max_bad_ratio = 1.0;
  const std::string path = Write("a.tsv", text);
  Result<Dataset> data = ReadCriteoFiles({path}, options);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(kLines - 3, data->size());
  EXPECT_EQ(kLines, data->bad_lines().lines_read);
  EXPECT_THAT(data->bad_lines().first_examples,
              ::testing::ElementsAre(StartsWith(path + ":1: "), StartsWith(path + ":7777: "),
                                     StartsWith(path + ":25000: ")));
  // Rows keep file order: row r came from line r + 2 (line 1 was bad).
  EXPECT_FLOAT_EQ(LogTransform(2), data->all().dense[0 * kCriteoDense + 4]);
  EXPECT_FLOAT_EQ(LogTransform(7776), data->all().dense[7774 * kCriteoDense + 4]);
  EXPECT_FLOAT_EQ(LogTransform(7778), data->all().dense[7775 * kCriteoDense + 4]);

  options.bad_lines = BadLinePolicy::kFail;
  text.replace(0, Line("9").size(), Line("1"));
  data = ReadCriteoFiles({Write("a.tsv", text)}, options);
  ASSERT_FALSE(data.ok());
  EXPECT_THAT(data.status().message(), StartsWith(path + ":7777: bad label"));
}

TEST_F(CriteoTest, LineLongerThanAReadBlockIsSkippedAsTooLong) {
  CriteoReadOptions options;
  options.max_bad_ratio = 1.0;
  std::string text = Line("1") + "\n" + std::string(size_t{70} << 20, 'x') + "\n" + Line("0");
  const std::string path = Write("long.tsv", text);
  text.clear();
  Result<Dataset> data = ReadCriteoFiles({path}, options);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ((std::vector<float>{1.0f, 0.0f}), data->all().labels);
  EXPECT_EQ(3, data->bad_lines().lines_read);
  EXPECT_EQ(1, data->bad_lines().by_reason.at("line too long"));
  EXPECT_THAT(data->bad_lines().first_examples[0], StartsWith(path + ":2: line too long"));
}

TEST_F(CriteoTest, FilesAreReadInTheGivenOrder) {
  const std::string a = Write("a.tsv", Line("1") + "\n");
  const std::string b = Write("b.tsv", Line("0") + "\n" + Line("0"));
  const std::string c = Write("c.tsv", Line("1") + "\n");
  Result<Dataset> data = ReadCriteoFiles({a, b, c}, {});
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ((std::vector<float>{1.0f, 0.0f, 0.0f, 1.0f}), data->all().labels);
  EXPECT_EQ(4, data->bad_lines().lines_read);
}

TEST_F(CriteoTest, BadLineInASecondFileNamesThatFileAndItsLine) {
  CriteoReadOptions options;
  options.bad_lines = BadLinePolicy::kFail;
  const std::string a = Write("a.tsv", ValidLines(3));
  const std::string b = Write("b.tsv", ValidLines(2) + Line("1", {{7, "x"}}) + "\n");
  Result<Dataset> data = ReadCriteoFiles({a, b}, options);
  ASSERT_FALSE(data.ok());
  EXPECT_THAT(data.status().message(), StartsWith(b + ":3: unparsable integer"));
}

TEST_F(CriteoTest, SampleFileReadsEveryRowWithTheSameResultForAnyThreadCount) {
  if (!FileExists(kSamplePath)) GTEST_SKIP() << "no sample data at " << kSamplePath;
  CriteoReadOptions options;
  options.threads = 1;
  options.bad_lines = BadLinePolicy::kFail;
  Result<Dataset> one = ReadCriteoFiles({kSamplePath}, options);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(8000, one->size());
  EXPECT_EQ(8000, one->bad_lines().lines_read);
  EXPECT_EQ(0, one->bad_lines().bad_lines);
  int64_t positives = 0;
  for (const float label : one->all().labels) positives += label == 1.0f ? 1 : 0;
  EXPECT_EQ(1728, positives);

  options.threads = 4;
  Result<Dataset> four = ReadCriteoFiles({kSamplePath}, options);
  ASSERT_TRUE(four.ok()) << four.status();
  ExpectSameBatch(one->all(), four->all());
}

TEST_F(CriteoTest, LargeFileParsesIdenticallyWithOneAndFourThreads) {
  // Big enough (about 9 MiB) to be cut into several pieces.
  std::string text = ValidLines(40000);
  const std::string path = Write("tiled.tsv", text);
  CriteoReadOptions options;
  options.threads = 1;
  Result<Dataset> one = ReadCriteoFiles({path}, options);
  options.threads = 4;
  Result<Dataset> four = ReadCriteoFiles({path}, options);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ(40000, one->size());
  ExpectSameBatch(one->all(), four->all());
}

TEST_F(CriteoTest, GzipFileReadsLikeThePlainFile) {
  const std::string text = ValidLines(3000) + Line("1", {{39, ""}});
  Result<Dataset> plain = ReadCriteoFiles({Write("a.tsv", text)}, {});
  Result<Dataset> gzip = ReadCriteoFiles({WriteGzip("a.tsv.gz", text)}, {});
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(gzip.ok()) << gzip.status();
  EXPECT_EQ(3001, gzip->size());
  ExpectSameBatch(plain->all(), gzip->all());
}

TEST_F(CriteoTest, TruncatedGzipIsAnErrorNamingTheFile) {
  const std::string path = WriteGzip("whole.tsv.gz", ValidLines(5000));
  Result<std::string> bytes = ReadFile(path);
  ASSERT_TRUE(bytes.ok());
  const std::string truncated = Write("cut.tsv.gz", bytes->substr(0, bytes->size() / 2));
  Result<Dataset> data = ReadCriteoFiles({truncated}, {});
  ASSERT_FALSE(data.ok());
  EXPECT_THAT(data.status().code(), ::testing::AnyOf(StatusCode::kDataLoss, StatusCode::kIOError));
  EXPECT_THAT(data.status().message(), HasSubstr(truncated));
}

TEST_F(CriteoTest, MissingFileIsNotFoundNamingIt) {
  const std::string path = Path("missing.tsv");
  Result<Dataset> data = ReadCriteoFiles({path}, {});
  EXPECT_EQ(StatusCode::kNotFound, data.status().code());
  EXPECT_THAT(data.status().message(), HasSubstr(path));
}

TEST_F(CriteoTest, DirectoryIsInvalidArgument) {
  Result<Dataset> data = ReadCriteoFiles({dir_.string()}, {});
  EXPECT_EQ(StatusCode::kInvalidArgument, data.status().code());
  EXPECT_THAT(data.status().message(), HasSubstr(dir_.string()));
}

TEST_F(CriteoTest, EmptyFileListIsInvalidArgument) {
  EXPECT_EQ(StatusCode::kInvalidArgument, ReadCriteoFiles({}, {}).status().code());
}

TEST(CriteoBadLinePolicyTest, ParsesSkipAndFailAndRejectsOtherNames) {
  EXPECT_EQ(BadLinePolicy::kSkip, *ParseBadLinePolicy("skip"));
  EXPECT_EQ(BadLinePolicy::kFail, *ParseBadLinePolicy("fail"));
  Result<BadLinePolicy> other = ParseBadLinePolicy("ignore");
  EXPECT_EQ(StatusCode::kInvalidArgument, other.status().code());
  EXPECT_THAT(other.status().message(), HasSubstr("ignore"));
}

}  // namespace
}  // namespace ember::io
