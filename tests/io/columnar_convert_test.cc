#include "io/columnar_convert.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/file.h"
#include "io/columnar.h"
#include "io/format_spec.h"
#include "tests/io/text_fixture.h"

namespace ember::io {
namespace {

using ::testing::HasSubstr;

// One text format with two files of lines in it, bad lines included.
struct RoundTripCase {
  const char* label;
  FormatSpec spec;
  std::string first;
  std::string second;
  bool gzip_second = false;
};

// `n` Criteo lines with missing values, negative integers and (every 7th)
// a line with a bad label.
std::string CriteoLines(int n, int seed) {
  std::string text;
  for (int i = 0; i < n; ++i) {
    const int r = i * 31 + seed;
    text += i % 7 == 3 ? "2" : (r % 3 == 0 ? "1" : "0");
    for (int j = 0; j < 13; ++j) {
      text += "\t";
      if ((r + j) % 5 != 0) text += std::to_string((r * (j + 1)) % 300 - 2);
    }
    for (int s = 0; s < 26; ++s) {
      text += "\t";
      if ((r + s) % 9 != 0) text.append("c").append(std::to_string((r + s * 7) % 40));
    }
    text += "\n";
  }
  return text;
}

std::vector<RoundTripCase> Cases() {
  std::vector<RoundTripCase> cases;
  {
    RoundTripCase c{"criteo", {}, CriteoLines(50, 1), CriteoLines(40, 2), true};
    cases.push_back(c);
  }
  {
    // Multi-hot bags (empty ones too), two labels (multi-task), a header,
    // an ignored column and bad lines (column count, bad label, number).
    RoundTripCase c;
    c.label = "csv";
    c.spec.name = "csv";
    c.spec.schema = "click=label,conv=label,price=dense:raw,user=cat,tags=multi,ts=ignore";
    c.spec.header = true;
    c.spec.delimiter = "tab";
    c.first =
        "ts\tclick\tconv\tuser\ttags\tprice\n"
        "9\t1\t0\tu1\ta|b|c\t2.5\n"
        "9\t0\t0\t\t\t\n"
        "9\t1\t1\tu2\tb\t-1\n"
        "9\t1\t1\tu2\tb\n"
        "9\t7\t1\tu2\tb\t1\n"
        "9\t0\t1\tu3\t|a||\t1e3\n";
    c.second =
        "ts\tclick\tconv\tuser\ttags\tprice\n"
        "9\t0\t0\tu9\tx|y\tabc\n"
        "9\t1\t0\tu9\tx|y\t0.5\n";
    cases.push_back(c);
  }
  {
    RoundTripCase c;
    c.label = "libsvm";
    c.spec.name = "libsvm";
    c.spec.field_starts = "0,10,100";
    c.first = "1 3:1 15:1 150:0.5\n-1 2:1 2:1\n0\n+1 12:0 101:1 # comment\nx 1:1\n";
    c.second = "1 5:1\n0 7:1:2\n-1 99:1 100:1\n";
    cases.push_back(c);
  }
  {
    RoundTripCase c;
    c.label = "libffm";
    c.spec.name = "libffm";
    c.spec.num_fields = 3;
    c.first = "1 0:5:1 1:957:1 2:5046:1\n0 2:1:1 2:2:1\n1 3:1:1\n";
    c.second = "0\n1 0:007:1 1:7:0.25\n";
    cases.push_back(c);
  }
  {
    RoundTripCase c;
    c.label = "slot";
    c.spec.name = "slot";
    c.spec.slots = "user,item";
    c.spec.dense_slots = "ctr:2";
    c.spec.label_slots = "click";
    c.first =
        "click:1 user:10 item:5 item:6 ctr:0.5 ctr:0.25\n"
        "user:11 click:0\n"
        "click:1 shop:3\n"
        "click:0 item:9 ctr:x\n";
    c.second = "click:1 item:1 item:1 item:2 user:4 ctr:1\n";
    cases.push_back(c);
  }
  return cases;
}

class ColumnarConvertTest : public TextFormatTest {
 protected:
  // Every row group of `path` against the same rows of `expected`, then all
  // rows at once.
  static void ExpectSameRows(const Dataset& expected, const std::string& path) {
    Result<std::unique_ptr<ColumnarFile>> file = OpenColumnar(path);
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_EQ(expected.size(), (*file)->rows());
    Batch want, got;
    for (int64_t g = 0; g < (*file)->num_row_groups(); ++g) {
      const int64_t begin = (*file)->RowGroupBegin(g);
      const int64_t end = begin + (*file)->RowGroupRows(g);
      expected.GetBatch(begin, end, &want);
      ASSERT_TRUE((*file)->ReadRows(begin, end, &got).ok());
      ExpectSameBatch(want, got);
    }
    Result<Dataset> all = ReadColumnarDataset(path);
    ASSERT_TRUE(all.ok()) << all.status();
    ExpectSameBatch(expected.all(), all->all());
  }
};

TEST_F(ColumnarConvertTest, EveryTextFormatRoundTripsToIdenticalBatches) {
  for (const RoundTripCase& c : Cases()) {
    SCOPED_TRACE(c.label);
    Result<std::unique_ptr<TextFormat>> format = MakeTextFormat(c.spec);
    ASSERT_TRUE(format.ok()) << format.status();
    const std::vector<std::string> paths = {
        Write(std::string(c.label) + "_1.txt", c.first),
        c.gzip_second ? WriteGzip(std::string(c.label) + "_2.txt.gz", c.second)
                      : Write(std::string(c.label) + "_2.txt", c.second)};
    Result<Dataset> expected = ReadTextFiles(paths, **format, Lenient());
    ASSERT_TRUE(expected.ok()) << expected.status();
    ASSERT_GT(expected->size(), 0);
    ASSERT_GT(expected->bad_lines().bad_lines, 0) << "each case has bad lines";

    ConvertOptions options;
    options.read = Lenient();
    options.write.rows_per_group = 3;  // Several groups, one cut inside each file.
    options.slot_bits = c.spec.slot_bits;
    const std::string output = Path(std::string(c.label) + ".col");
    Result<ConvertReport> report = ConvertTextToColumnar(paths, **format, output, options);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(2, report->files);
    EXPECT_EQ(expected->size(), report->rows);
    EXPECT_EQ(expected->bad_lines().lines_read, report->bad_lines.lines_read);
    EXPECT_EQ(expected->bad_lines().bad_lines, report->bad_lines.bad_lines);
    EXPECT_EQ(expected->bad_lines().by_reason, report->bad_lines.by_reason);
    EXPECT_EQ(expected->bad_lines().first_examples, report->bad_lines.first_examples);
    EXPECT_EQ(static_cast<int64_t>(std::filesystem::file_size(output)), report->output_bytes);
    EXPECT_EQ((expected->size() + 2) / 3, report->row_groups);
    EXPECT_GT(report->input_bytes, 0);
    ExpectSameRows(*expected, output);

    Result<std::unique_ptr<ColumnarFile>> file = OpenColumnar(output);
    ASSERT_TRUE(file.ok());
    EXPECT_EQ(c.spec.slot_bits, (*file)->shape().slot_bits);
  }
}

TEST_F(ColumnarConvertTest, MultiLabelCsvKeepsItsLabelsInSchemaOrder) {
  FormatSpec spec;
  spec.name = "csv";
  spec.schema = "label,cat,label:threshold=4";
  Result<std::unique_ptr<TextFormat>> format = MakeTextFormat(spec);
  ASSERT_TRUE(format.ok()) << format.status();
  const std::string input = Write("a.csv", "1,x,5\n0,y,3\n");
  Result<ConvertReport> report =
      ConvertTextToColumnar({input}, **format, Path("a.col"), ConvertOptions());
  ASSERT_TRUE(report.ok()) << report.status();
  Result<Dataset> data = ReadColumnarDataset(Path("a.col"));
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(2, data->num_labels());
  EXPECT_EQ((std::vector<float>{1, 1, 0, 0}), data->all().labels);
}

TEST_F(ColumnarConvertTest, ProgressIsReportedEvery4096RowsWithTheBytesRead) {
  Result<std::unique_ptr<TextFormat>> format = MakeTextFormat(FormatSpec());
  ASSERT_TRUE(format.ok());
  const std::vector<std::string> paths = {Write("a.tsv", CriteoLines(5000, 1)),
                                          Write("b.tsv", CriteoLines(4000, 2))};
  const int64_t total_bytes = static_cast<int64_t>(std::filesystem::file_size(paths[0]) +
                                                   std::filesystem::file_size(paths[1]));
  std::vector<int64_t> rows, bytes;
  ConvertOptions options;
  options.read = Lenient();
  Result<ConvertReport> report = ConvertTextToColumnar(paths, **format, Path("out.col"), options,
                                                       [&](const ConvertReport& so_far) {
                                                         rows.push_back(so_far.rows);
                                                         bytes.push_back(so_far.input_bytes);
                                                       });
  ASSERT_TRUE(report.ok()) << report.status();
  // One line in 7 has the bad label 2: 7715 good rows of 9000 lines.
  EXPECT_EQ(7715, report->rows);
  EXPECT_EQ(1285, report->bad_lines.bad_lines);
  EXPECT_EQ((std::vector<int64_t>{4096, 7715}), rows);
  ASSERT_EQ(2u, bytes.size());
  // Estimated from the lines of the pieces reached: the first batch lies in
  // a.tsv, one piece (< 1 MiB), so the estimate is the total bytes times
  // a.tsv's share of the lines: its size, give or take the line lengths.
  EXPECT_NEAR(static_cast<double>(std::filesystem::file_size(paths[0])), bytes[0], 100);
  EXPECT_EQ(total_bytes, bytes[1]);
  EXPECT_EQ(total_bytes, report->input_bytes);
  EXPECT_EQ(2, report->files);
}

TEST_F(ColumnarConvertTest, AFailureLeavesNoOutputAndAnOldOneIntact) {
  Result<std::unique_ptr<TextFormat>> format = MakeTextFormat(FormatSpec());
  ASSERT_TRUE(format.ok());
  ASSERT_TRUE(WriteFileAtomic(Path("out.col"), "old").ok());
  const std::vector<std::string> paths = {Write("a.tsv", CriteoLines(10, 1)), Path("missing.tsv")};
  ConvertOptions options;
  options.read = Lenient();
  Result<ConvertReport> report = ConvertTextToColumnar(paths, **format, Path("out.col"), options);
  EXPECT_EQ(StatusCode::kNotFound, report.status().code());
  EXPECT_THAT(report.status().message(), HasSubstr("missing.tsv"));
  EXPECT_EQ("old", *ReadFile(Path("out.col")));
  // Nothing but the input and the old output: no temporary file is left.
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(2, entries);
}

TEST_F(ColumnarConvertTest, BadLinesFailTheConversionUnderTheFailPolicy) {
  Result<std::unique_ptr<TextFormat>> format = MakeTextFormat(FormatSpec());
  ASSERT_TRUE(format.ok());
  ConvertOptions options;
  options.read = Strict();
  Result<ConvertReport> report = ConvertTextToColumnar({Write("a.tsv", CriteoLines(10, 1))},
                                                       **format, Path("out.col"), options);
  EXPECT_EQ(StatusCode::kInvalidArgument, report.status().code());
  EXPECT_THAT(report.status().message(), HasSubstr("a.tsv:4: bad label"));
  EXPECT_FALSE(FileExists(Path("out.col")));
}

TEST_F(ColumnarConvertTest, RefusesToOverwriteAnInputOrWriteIntoAMissingDirectory) {
  Result<std::unique_ptr<TextFormat>> format = MakeTextFormat(FormatSpec());
  ASSERT_TRUE(format.ok());
  const std::string input = Write("a.tsv", CriteoLines(5, 1));
  EXPECT_EQ(StatusCode::kInvalidArgument,
            ConvertTextToColumnar({input}, **format, input, ConvertOptions()).status().code());
  EXPECT_EQ(StatusCode::kInvalidArgument,
            ConvertTextToColumnar({input}, **format, Path("no/dir/x.col"), ConvertOptions())
                .status()
                .code());
  EXPECT_EQ(StatusCode::kInvalidArgument,
            ConvertTextToColumnar({}, **format, Path("x.col"), ConvertOptions()).status().code());
}

TEST_F(ColumnarConvertTest, ColumnarFilesJoinAndRegroupIntoOne) {
  Result<std::unique_ptr<TextFormat>> format = MakeTextFormat(FormatSpec());
  ASSERT_TRUE(format.ok());
  ConvertOptions options;
  options.read = Lenient();
  options.write.rows_per_group = 7;
  const std::vector<std::string> texts = {Write("a.tsv", CriteoLines(30, 1)),
                                          Write("b.tsv", CriteoLines(25, 2))};
  ASSERT_TRUE(ConvertTextToColumnar({texts[0]}, **format, Path("a.col"), options).ok());
  ASSERT_TRUE(ConvertTextToColumnar({texts[1]}, **format, Path("b.col"), options).ok());
  options.write.rows_per_group = 10;
  Result<ConvertReport> report =
      ConvertColumnarToColumnar({Path("a.col"), Path("b.col")}, Path("ab.col"), options);
  ASSERT_TRUE(report.ok()) << report.status();
  Result<Dataset> expected = ReadTextFiles(texts, **format, Lenient());
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(expected->size(), report->rows);
  EXPECT_EQ((expected->size() + 9) / 10, report->row_groups);
  ExpectSameRows(*expected, Path("ab.col"));

  // Files of another shape are not joined.
  FormatSpec libffm;
  libffm.name = "libffm";
  libffm.num_fields = 2;
  Result<std::unique_ptr<TextFormat>> other = MakeTextFormat(libffm);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(
      ConvertTextToColumnar({Write("c.ffm", "1 0:1:1\n")}, **other, Path("c.col"), ConvertOptions())
          .ok());
  Result<ConvertReport> mixed =
      ConvertColumnarToColumnar({Path("a.col"), Path("c.col")}, Path("ac.col"), options);
  EXPECT_EQ(StatusCode::kInvalidArgument, mixed.status().code());
  EXPECT_THAT(mixed.status().message(), HasSubstr("c.col"));
}

TEST_F(ColumnarConvertTest, CriteoSampleRoundTripsToIdenticalBatches) {
  const std::string path = SharedDataPath("criteo/criteo_kaggle_8k.tsv");
  if (!FileExists(path)) GTEST_SKIP() << "no shared data at " << path;
  Result<std::unique_ptr<TextFormat>> format = MakeTextFormat(FormatSpec());
  ASSERT_TRUE(format.ok());
  Result<Dataset> expected = ReadTextFiles({path}, **format, TextReadOptions());
  ASSERT_TRUE(expected.ok()) << expected.status();
  ConvertOptions options;
  options.write.rows_per_group = 1000;
  Result<ConvertReport> report = ConvertTextToColumnar({path}, **format, Path("k.col"), options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(expected->size(), report->rows);
  ExpectSameRows(*expected, Path("k.col"));
}

}  // namespace
}  // namespace ember::io
