#include "io/text_reader.h"

#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "io/criteo.h"
#include "io/feature_hash.h"
#include "io/format_spec.h"
#include "tests/io/text_fixture.h"

namespace ember::io {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// A format for testing the reader: "label key key ...", blank separated, one
// slot holding the keys as a bag (HashCategorical(0, key)). A key "!" makes
// the line bad after its example was partly appended; a label other than
// 0/1 is a bad label. With a header, the header must be "label keys".
class TestParser final : public LineParser {
 public:
  bool ParseLine(std::string_view line, Batch* out, LineError* error) const override {
    std::vector<std::string_view> tokens;
    size_t start = 0;
    while (start <= line.size()) {
      size_t end = line.find(' ', start);
      if (end == std::string_view::npos) end = line.size();
      if (end > start) tokens.push_back(line.substr(start, end - start));
      start = end + 1;
    }
    if (tokens.empty() || (tokens[0] != "0" && tokens[0] != "1")) {
      *error = LineError{BadLineReason::kBadLabel, std::string(line.substr(0, 8))};
      return false;
    }
    out->labels.push_back(tokens[0] == "1" ? 1.0f : 0.0f);
    for (size_t k = 1; k < tokens.size(); ++k) {
      if (tokens[k] == "!") {
        *error = LineError{BadLineReason::kBadFeature, "!"};
        return false;
      }
      out->keys.push_back(HashCategorical(0, tokens[k]));
    }
    out->offsets.push_back(static_cast<int64_t>(out->keys.size()));
    return true;
  }
};

class TestFormat final : public TextFormat {
 public:
  explicit TestFormat(bool header = false) : header_(header) {}
  const char* name() const override { return "test"; }
  TextLayout layout() const override { return TextLayout{1, 0, 1}; }
  bool has_header() const override { return header_; }
  Result<std::unique_ptr<LineParser>> NewLineParser(std::string_view header) const override {
    if (header_ && header != "label keys") {
      return Status::InvalidArgument("header must be \"label keys\", got \"", header, "\"");
    }
    return std::make_unique<TestParser>();
  }

 private:
  bool header_;
};

// `n` lines "label k<i> k<i+1> ..." with bags of 0 to 4 keys.
std::string TestLines(int n) {
  std::string text;
  for (int i = 0; i < n; ++i) {
    text += i % 3 == 0 ? "1" : "0";
    for (int k = 0; k < i % 5; ++k) text += " k" + std::to_string(i + k);
    text += "\n";
  }
  return text;
}

class TextReaderTest : public TextFormatTest {};

TEST(ParseLinesTest, AppendsOneExamplePerGoodLineAndLeavesBadLinesOut) {
  const TestParser parser;
  ParsedLines out;
  ParseLines("1 a b\n0 ! c\n7 x\n0\r\n1 c", parser, TextLayout{1, 0, 1}, false, &out);
  ExpectWellFormed(out.rows);
  EXPECT_EQ(5, out.lines);
  ASSERT_EQ(3, out.rows.size);
  EXPECT_EQ((std::vector<float>{1.0f, 0.0f, 1.0f}), out.rows.labels);
  // The partial example of line 2 (its label and no bag) is gone.
  EXPECT_EQ((std::vector<Key>{HashCategorical(0, "a"), HashCategorical(0, "b")}),
            BagKeys(out.rows, 0, 0));
  EXPECT_EQ(std::vector<Key>{}, BagKeys(out.rows, 1, 0));
  EXPECT_EQ(std::vector<Key>{HashCategorical(0, "c")}, BagKeys(out.rows, 2, 0));
  EXPECT_EQ(2, out.bad_lines);
  EXPECT_EQ(1, out.by_reason[static_cast<int>(BadLineReason::kBadFeature)]);
  EXPECT_EQ(1, out.by_reason[static_cast<int>(BadLineReason::kBadLabel)]);
  ASSERT_EQ(2u, out.examples.size());
  EXPECT_EQ(2, out.examples[0].line);
  EXPECT_EQ(BadLineReason::kBadFeature, out.examples[0].reason);
  EXPECT_EQ(3, out.examples[1].line);
  EXPECT_EQ("7 x", out.examples[1].got);
}

TEST(ParseLinesTest, StopsAfterTheFirstBadLineWhenAsked) {
  const TestParser parser;
  ParsedLines out;
  ParseLines("1 a\n2\n1 b\n", parser, TextLayout{1, 0, 1}, true, &out);
  EXPECT_EQ(2, out.lines);
  EXPECT_EQ(1, out.rows.size);
  EXPECT_EQ(1, out.bad_lines);
}

TEST(ParseLinesTest, ReusedOutputIsClearedAndLongLinesAreBadWithoutParsing) {
  const TestParser parser;
  ParsedLines out;
  ParseLines("1 a\n1 b\n", parser, TextLayout{1, 0, 1}, false, &out);
  ParseLines("1 " + std::string(kMaxLineBytes, 'x') + "\n0 c", parser, TextLayout{1, 0, 1}, false,
             &out);
  ExpectWellFormed(out.rows);
  EXPECT_EQ(2, out.lines);
  ASSERT_EQ(1, out.rows.size);
  EXPECT_EQ(std::vector<Key>{HashCategorical(0, "c")}, BagKeys(out.rows, 0, 0));
  EXPECT_EQ(1, out.by_reason[static_cast<int>(BadLineReason::kLineTooLong)]);
  EXPECT_THAT(out.examples[0].got, HasSubstr("bytes"));
}

TEST(BadLineReasonTest, EveryReasonHasItsOwnName) {
  std::set<std::string> names;
  for (int reason = 0; reason < kNumBadLineReasons; ++reason) {
    names.insert(BadLineReasonName(static_cast<BadLineReason>(reason)));
  }
  EXPECT_EQ(static_cast<size_t>(kNumBadLineReasons), names.size());
  EXPECT_EQ(0u, names.count("unknown"));
}

TEST_F(TextReaderTest, HeaderLineIsSkippedButCountsForLineNumbers) {
  const TestFormat format(/*header=*/true);
  Result<Dataset> data = ReadText(format, "\xEF\xBB\xBFlabel keys\r\n1 a\n5\n0 b\n");
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(2, data->size());
  EXPECT_EQ(3, data->bad_lines().lines_read);
  EXPECT_THAT(data->bad_lines().first_examples, ElementsAre(HasSubstr("data.txt:3: bad label")));
}

// A byte order mark before the first line of a file without a header is not
// part of that line (it made a valid first line's label bad).
TEST_F(TextReaderTest, AByteOrderMarkIsNotPartOfTheFirstLine) {
  const TestFormat format(/*header=*/false);
  Result<Dataset> data = ReadText(format, "\xEF\xBB\xBF" "1 a\n0 b\n");
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(2, data->size());
  EXPECT_EQ(0, data->bad_lines().bad_lines);
  Result<Dataset> plain = ReadText(format, "1 a\n0 b\n");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->all().keys, data->all().keys);
  EXPECT_EQ(plain->all().labels, data->all().labels);
}

TEST_F(TextReaderTest, HeaderTheFormatRejectsFailsNamingTheFile) {
  const TestFormat format(/*header=*/true);
  Result<Dataset> data = ReadText(format, "label stuff\n1 a\n");
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(StatusCode::kInvalidArgument, data.status().code());
  EXPECT_THAT(data.status().message(), StartsWith(Path("data.txt") + ":1: header must be"));
}

TEST_F(TextReaderTest, EmptyFileAndHeaderOnlyFileGiveNoExamples) {
  const TestFormat format(/*header=*/true);
  for (const std::string text : {"", "label keys", "label keys\n", "label keys\n\n\r\n"}) {
    SCOPED_TRACE(text);
    Result<Dataset> data = ReadText(format, text);
    ASSERT_TRUE(data.ok()) << data.status();
    EXPECT_EQ(0, data->size());
    EXPECT_EQ(0, data->bad_lines().lines_read);
    EXPECT_EQ(1, data->num_slots());
  }
}

TEST_F(TextReaderTest, EveryFileHasItsOwnHeader) {
  const TestFormat format(/*header=*/true);
  const std::string a = Write("a.txt", "label keys\n1 a\n");
  const std::string b = Write("b.txt", "label keys\n0 b\n1 c\n");
  Result<Dataset> data = ReadTextFiles({a, b}, format, Strict());
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ((std::vector<float>{1.0f, 0.0f, 1.0f}), data->all().labels);
  EXPECT_EQ(3, data->bad_lines().lines_read);
}

TEST_F(TextReaderTest, VariableBagsReadIdenticallyWithOneAndTwoThreadsAcrossPieces) {
  // About 3.5 MiB: several 1 MiB pieces with bags of 0 to 4 keys.
  const std::string path = Write("big.txt", TestLines(400000));
  const TestFormat format;
  const Dataset one = ReadOnOneAndTwoThreads(path, format);
  ASSERT_EQ(400000, one.size());
  // Example i has i % 5 keys, k<i> first.
  EXPECT_EQ(4, one.all().BagSize(399999, 0));
  EXPECT_EQ(HashCategorical(0, "k399999"), BagKeys(one.all(), 399999, 0)[0]);
}

TEST_F(TextReaderTest, KeepEveryNthReadsOneRanksShareOfEveryFileInOrder) {
  // Two files of several pieces each, with bad lines (which are not
  // examples and so take no index): the shares of 3 ranks are every third
  // example of the whole read, and together hold each example once.
  std::string first = TestLines(150000);
  first.insert(first.find('\n', 1000) + 1, "7 bad label\n");
  const std::string a = Write("a.txt", first), b = Write("b.txt", TestLines(1001));
  const TestFormat format;
  Result<Dataset> whole = ReadTextFiles({a, b}, format, Lenient());
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(151001, whole->size());
  int64_t held = 0;
  for (int64_t offset = 0; offset < 3; ++offset) {
    TextReadOptions options = Lenient();
    options.threads = 2;
    options.keep_every = 3;
    options.keep_offset = offset;
    Result<Dataset> share = ReadTextFiles({a, b}, format, options);
    ASSERT_TRUE(share.ok()) << share.status();
    EXPECT_EQ(1, share->bad_lines().bad_lines) << "bad lines count over every line";
    std::vector<int64_t> indices;
    for (int64_t i = offset; i < whole->size(); i += 3) indices.push_back(i);
    Batch expected;
    whole->GatherBatch(indices, &expected);
    ExpectSameBatch(expected, share->all());
    held += share->size();
  }
  EXPECT_EQ(whole->size(), held);
  TextReadOptions bad = Lenient();
  bad.keep_every = 2;
  bad.keep_offset = 2;
  EXPECT_EQ(StatusCode::kInvalidArgument, ReadTextFiles({a}, format, bad).status().code());
}

TEST_F(TextReaderTest, GzipFileReadsLikeThePlainFile) {
  const std::string text = TestLines(5000);
  const TestFormat format;
  Result<Dataset> plain = ReadTextFiles({Write("a.txt", text)}, format, Strict());
  Result<Dataset> gzip = ReadTextFiles({WriteGzip("a.txt.gz", text)}, format, Strict());
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(gzip.ok()) << gzip.status();
  ExpectSameBatch(plain->all(), gzip->all());
}

TEST_F(TextReaderTest, TruncatedGzipIsDataLossNamingTheFile) {
  const std::string path = WriteGzip("whole.txt.gz", TestLines(20000));
  Result<std::string> bytes = ReadFile(path);
  ASSERT_TRUE(bytes.ok());
  const std::string truncated = Write("cut.txt.gz", bytes->substr(0, bytes->size() / 2));
  Result<Dataset> data = ReadTextFiles({truncated}, TestFormat(), Lenient());
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(StatusCode::kDataLoss, data.status().code());
  EXPECT_THAT(data.status().message(), HasSubstr(truncated));
}

TEST_F(TextReaderTest, NoPathsIsInvalidArgumentNamingTheFormat) {
  Result<Dataset> data = ReadTextFiles({}, TestFormat(), {});
  EXPECT_EQ(StatusCode::kInvalidArgument, data.status().code());
  EXPECT_THAT(data.status().message(), HasSubstr("test"));
}

TEST_F(TextReaderTest, CriteoFormatByNameReadsLikeReadCriteoFiles) {
  const std::string path = SharedDataPath("criteo/criteo_kaggle_8k.tsv");
  if (!FileExists(path)) GTEST_SKIP() << "no shared data at " << path;
  Result<Dataset> expected = ReadCriteoFiles({path}, {});
  Result<std::unique_ptr<TextFormat>> format = MakeTextFormat(FormatSpec{});
  ASSERT_TRUE(format.ok()) << format.status();
  Result<Dataset> data = ReadTextFiles({path}, **format, Strict());
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_TRUE(data.ok()) << data.status();
  ExpectSameBatch(expected->all(), data->all());
}

}  // namespace
}  // namespace ember::io
