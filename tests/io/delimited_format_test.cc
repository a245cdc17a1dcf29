#include "io/delimited_format.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "io/criteo.h"
#include "io/feature_hash.h"
#include "tests/io/text_fixture.h"

namespace ember::io {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

DelimitedSchema Schema(const std::string& spec) {
  Result<DelimitedSchema> schema = ParseSchemaSpec(spec);
  EXPECT_TRUE(schema.ok()) << schema.status();
  return schema.ok() ? *schema : DelimitedSchema{};
}

std::unique_ptr<TextFormat> Format(const std::string& spec, char delimiter = ',',
                                   bool header = false) {
  DelimitedFormatOptions options;
  options.schema = Schema(spec);
  options.delimiter = delimiter;
  options.header = header;
  Result<std::unique_ptr<TextFormat>> format = NewDelimitedFormat(options);
  EXPECT_TRUE(format.ok()) << format.status();
  return format.ok() ? std::move(*format) : nullptr;
}

// Distinct keys of slot s over all examples.
size_t DistinctKeys(const Batch& batch, int s) {
  std::set<Key> keys;
  for (int64_t i = 0; i < batch.size; ++i) {
    for (const Key key : BagKeys(batch, i, s)) keys.insert(key);
  }
  return keys.size();
}

TEST(SchemaSpecTest, ParsesReferencesRolesAndOptions) {
  const DelimitedSchema schema = Schema(
      " y=label:threshold=4 , 1-3=dense:raw:min=0:max=10,ip=categorical, tags=multi:sep=pipe,"
      "dense,7=ignore,cat");
  ASSERT_EQ(7u, schema.columns.size());
  const ColumnSpec& label = schema.columns[0];
  EXPECT_EQ("y", label.name);
  EXPECT_EQ(ColumnRole::kLabel, label.role);
  EXPECT_EQ(4.0, label.threshold);
  const ColumnSpec& dense = schema.columns[1];
  EXPECT_EQ(1, dense.first_index);
  EXPECT_EQ(3, dense.last_index);
  EXPECT_EQ(DenseTransform::kRaw, dense.transform);
  EXPECT_EQ(0.0, dense.min);
  EXPECT_EQ(10.0, dense.max);
  EXPECT_EQ(ColumnRole::kCategorical, schema.columns[2].role);
  EXPECT_EQ("ip", schema.columns[2].name);
  EXPECT_EQ(ColumnRole::kMulti, schema.columns[3].role);
  EXPECT_EQ('|', schema.columns[3].inner_delimiter);
  EXPECT_EQ("", schema.columns[4].name);
  EXPECT_EQ(-1, schema.columns[4].first_index);
  EXPECT_FALSE(schema.columns[4].transform.has_value());
  EXPECT_EQ(7, schema.columns[5].first_index);
  EXPECT_EQ(ColumnRole::kIgnore, schema.columns[5].role);
  EXPECT_EQ(ColumnRole::kCategorical, schema.columns[6].role);
}

struct SchemaErrorCase {
  const char* spec;
  const char* message;  // Part of the error message.
};

TEST(SchemaSpecTest, RejectsBadSpecsNamingTheProblem) {
  const SchemaErrorCase cases[] = {
      {"y=label,ip=catg", "unknown role \"catg\""},
      {"y=label,ip=catg", "schema entry 2"},
      {"y=label,a=cat,a=dense", "names column \"a\" twice"},
      {"ip=cat,app=cat", "no label column"},
      {"", "unknown role"},
      {"label,70000=cat", "column index out of range"},
      {"label,5-3=cat", "is empty"},
      {"label:log1p", "applies to dense columns only"},
      {"label,x=cat:sep=pipe", "applies to multi columns only"},
      {"label:min=1", "applies to dense columns only"},
      {"label,x=dense:threshold=1", "applies to label columns only"},
      {"label,x=dense:min=5:max=1", "above max"},
      {"label,x=dense:min=abc", "needs a number"},
      {"label,x=dense:max=", "needs a number"},
      {"label,x=multi:sep=ab", "delimiter"},
      {"label,x=dense:bogus", "unknown option \"bogus\""},
  };
  for (const SchemaErrorCase& c : cases) {
    SCOPED_TRACE(c.spec);
    Result<DelimitedSchema> schema = ParseSchemaSpec(c.spec);
    ASSERT_FALSE(schema.ok());
    EXPECT_EQ(StatusCode::kInvalidArgument, schema.status().code());
    EXPECT_THAT(schema.status().message(), HasSubstr(c.message));
  }
}

TEST(SchemaFileTest, ReadsOneEntryPerLineWithCommentsLikeTheSpec) {
  const std::string text =
      "# TalkingData\r\n"
      "\n"
      "ip        cat\r\n"
      "1-2       dense  raw  max=5   # clipped\n"
      "-         multi  sep=,\n"
      "   y      label threshold=0.5\n";
  Result<DelimitedSchema> file = ParseSchemaText(text, "schema.txt");
  ASSERT_TRUE(file.ok()) << file.status();
  const DelimitedSchema spec =
      Schema("ip=cat,1-2=dense:raw:max=5,multi:sep=comma,y=label:threshold=0.5");
  ASSERT_EQ(spec.columns.size(), file->columns.size());
  for (size_t i = 0; i < spec.columns.size(); ++i) {
    SCOPED_TRACE(i);
    const ColumnSpec& a = spec.columns[i];
    const ColumnSpec& b = file->columns[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.first_index, b.first_index);
    EXPECT_EQ(a.last_index, b.last_index);
    EXPECT_EQ(a.role, b.role);
    EXPECT_EQ(a.transform, b.transform);
    EXPECT_EQ(a.max, b.max);
    EXPECT_EQ(a.threshold, b.threshold);
    EXPECT_EQ(a.inner_delimiter, b.inner_delimiter);
  }
}

TEST(SchemaFileTest, ErrorsNameTheFileAndLine) {
  Result<DelimitedSchema> schema = ParseSchemaText("y label\nip\n", "s.txt");
  ASSERT_FALSE(schema.ok());
  EXPECT_THAT(schema.status().message(), StartsWith("s.txt:2: expected"));
  schema = ParseSchemaText("y label\n\nip bogus\n", "s.txt");
  EXPECT_THAT(schema.status().message(), StartsWith("s.txt:3: unknown role"));
  schema = ParseSchemaText("ip cat\n", "s.txt");
  EXPECT_THAT(schema.status().message(), StartsWith("s.txt: schema has no label column"));
  EXPECT_EQ(StatusCode::kNotFound, ReadSchemaFile("/nonexistent/schema.txt").status().code());
}

TEST(DelimiterTest, AcceptsOneByteOrAName) {
  EXPECT_EQ(',', *ParseDelimiter(","));
  EXPECT_EQ('\t', *ParseDelimiter("tab"));
  EXPECT_EQ('\t', *ParseDelimiter("\\t"));
  EXPECT_EQ('|', *ParseDelimiter("pipe"));
  EXPECT_EQ(' ', *ParseDelimiter("space"));
  EXPECT_EQ(';', *ParseDelimiter("semicolon"));
  EXPECT_EQ(':', *ParseDelimiter("colon"));
  EXPECT_EQ(StatusCode::kInvalidArgument, ParseDelimiter("ab").status().code());
  EXPECT_EQ(StatusCode::kInvalidArgument, ParseDelimiter("").status().code());
  EXPECT_EQ(StatusCode::kInvalidArgument, ParseDelimiter("\n").status().code());
}

TEST(DelimitedFormatTest, RejectsSchemasThatCannotBeBound) {
  struct Case {
    const char* spec;
    char delimiter;
    int slot_bits;
    const char* message;
  };
  const Case cases[] = {
      {"label,0=cat", ',', 10, "column 0 is given two roles"},
      {"2=label,1=cat,dense", ',', 10, "column 2 is given two roles"},
      {"label,x=multi:sep=comma", ',', 10, "inner delimiter is the field delimiter"},
      {"label,cat,cat,cat", ',', 1, "slot bits"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spec);
    DelimitedFormatOptions options;
    options.schema = Schema(c.spec);
    options.delimiter = c.delimiter;
    options.slot_bits = c.slot_bits;
    Result<std::unique_ptr<TextFormat>> format = NewDelimitedFormat(options);
    ASSERT_FALSE(format.ok());
    EXPECT_EQ(StatusCode::kInvalidArgument, format.status().code());
    EXPECT_THAT(format.status().message(), HasSubstr(c.message));
  }
  DelimitedFormatOptions no_label;
  EXPECT_EQ(StatusCode::kInvalidArgument, NewDelimitedFormat(no_label).status().code());
}

class DelimitedReadTest : public TextFormatTest {};

TEST_F(DelimitedReadTest, ColumnsAreBoundByHeaderNameInSchemaOrder) {
  // The schema lists the columns in another order than the file and leaves
  // "junk" out; slots and dense values follow the schema.
  const auto format = Format("y=label,app=cat,ip=cat,n=dense,m=dense:raw", ',', true);
  ASSERT_NE(nullptr, format);
  EXPECT_EQ(2, format->layout().num_slots);
  EXPECT_EQ(2, format->layout().num_dense);
  Result<Dataset> data =
      ReadText(*format, "ip,m,junk,app,n,y\n7,2.5,zz,abc,3,1\n8,-1,,x,,0\n", Strict());
  ASSERT_TRUE(data.ok()) << data.status();
  const Batch& all = data->all();
  ExpectWellFormed(all);
  ASSERT_EQ(2, all.size);
  EXPECT_EQ((std::vector<float>{1.0f, 0.0f}), all.labels);
  EXPECT_EQ(std::vector<Key>{HashCategorical(0, "abc")}, BagKeys(all, 0, 0));
  EXPECT_EQ(std::vector<Key>{HashCategorical(1, "7")}, BagKeys(all, 0, 1));
  EXPECT_EQ(std::vector<Key>{HashCategorical(0, "x")}, BagKeys(all, 1, 0));
  EXPECT_EQ((std::vector<float>{LogTransform(3), 2.5f, 0.0f, -1.0f}), all.dense);
}

TEST_F(DelimitedReadTest, HeaderWithoutASchemaNameFailsNamingTheFile) {
  const auto format = Format("y=label,ip=cat", ',', true);
  Result<Dataset> data = ReadText(*format, "ip,z\n1,1\n");
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(StatusCode::kInvalidArgument, data.status().code());
  EXPECT_THAT(data.status().message(),
              StartsWith(Path("data.txt") + ":1: schema column \"y\" is not in the header"));
  data = ReadText(*format, "y,ip,y\n1,1,1\n");
  EXPECT_THAT(data.status().message(), HasSubstr("in the header more than once"));
  data = ReadText(*Format("y=label,5=cat", ',', true), "y,ip\n1,1\n");
  EXPECT_THAT(data.status().message(), HasSubstr("column index out of range"));
  data = ReadText(*Format("y=label,ip=cat,1=dense", ',', true), "y,ip\n1,1\n");
  EXPECT_THAT(data.status().message(), HasSubstr("column 1 is given two roles"));
}

TEST_F(DelimitedReadTest, WithoutHeaderColumnsArePositionalAndCountMustMatch) {
  // Names are only labels here; "3" skips column 2.
  const auto format = Format("click=label,user=cat,3=cat");
  Result<Dataset> data = ReadText(*format, "1,u1,skipped,i1\n0,u2,s,i2,extra\n1,u3,i3\n");
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ(1, data->size());
  EXPECT_EQ(std::vector<Key>{HashCategorical(1, "i1")}, BagKeys(data->all(), 0, 1));
  EXPECT_EQ(2, data->bad_lines().by_reason.at("column count"));
  EXPECT_THAT(data->bad_lines().first_examples,
              ElementsAre(HasSubstr(":2: column count (got 5 columns)"),
                          HasSubstr(":3: column count (got 3 columns)")));
}

TEST_F(DelimitedReadTest, DenseTransformsClipAndMissingValues) {
  DelimitedFormatOptions options;
  options.schema = Schema("label,dense,dense:raw,dense:min=0:max=100,dense:raw:min=-1:max=1");
  options.dense_defaults.max = 1000.0;  // Applies to the first and third.
  Result<std::unique_ptr<TextFormat>> format = NewDelimitedFormat(options);
  ASSERT_TRUE(format.ok()) << format.status();
  Result<Dataset> data = ReadText(**format,
                                  "1,5,5,5,5\n"
                                  "0,5000,-3.5,250,-0.25\n"
                                  "0,-2,1e3,-7,\n"
                                  "1,,,,\n",
                                  Strict());
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ((std::vector<float>{LogTransform(5), 5.0f, LogTransform(5), 1.0f,          //
                                LogTransform(1000), -3.5f, LogTransform(100), -0.25f,  //
                                0.0f, 1000.0f, 0.0f, 0.0f,                             //
                                0.0f, 0.0f, 0.0f, 0.0f}),
            data->all().dense);
}

TEST_F(DelimitedReadTest, MissingCategoricalHashesAsEmptyAndMultiFieldsAreBags) {
  const auto format = Format("label,cat,tags=multi,multi:sep=semicolon");
  Result<Dataset> data = ReadText(*format,
                                  "1,a,x|y|z,p;q\n"
                                  "0,,,\n"
                                  "1,b,|x||,;\n"
                                  "0,c,x|x,solo\n",
                                  Strict());
  ASSERT_TRUE(data.ok()) << data.status();
  const Batch& all = data->all();
  ExpectWellFormed(all);
  ASSERT_EQ(4, all.size);
  EXPECT_EQ(std::vector<Key>{HashCategorical(0, "a")}, BagKeys(all, 0, 0));
  EXPECT_EQ(
      (std::vector<Key>{HashCategorical(1, "x"), HashCategorical(1, "y"), HashCategorical(1, "z")}),
      BagKeys(all, 0, 1));
  EXPECT_EQ((std::vector<Key>{HashCategorical(2, "p"), HashCategorical(2, "q")}),
            BagKeys(all, 0, 2));
  EXPECT_EQ(std::vector<Key>{HashCategorical(0, "")}, BagKeys(all, 1, 0));
  EXPECT_EQ(std::vector<Key>{}, BagKeys(all, 1, 1));
  EXPECT_EQ(std::vector<Key>{}, BagKeys(all, 1, 2));
  // Empty values inside a bag are skipped.
  EXPECT_EQ(std::vector<Key>{HashCategorical(1, "x")}, BagKeys(all, 2, 1));
  EXPECT_EQ(std::vector<Key>{}, BagKeys(all, 2, 2));
  EXPECT_EQ((std::vector<Key>{HashCategorical(1, "x"), HashCategorical(1, "x")}),
            BagKeys(all, 3, 1));
}

TEST_F(DelimitedReadTest, SeveralLabelColumnsMakeMultiTaskExamples) {
  const auto format = Format("click=label,cat,like=label,stay=label:threshold=30", '\t');
  ASSERT_EQ(3, format->layout().num_labels);
  Result<Dataset> data = ReadText(*format, "1\ta\t0\t45\n0\tb\t0.5\t12\n", Strict());
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(3, data->num_labels());
  EXPECT_EQ((std::vector<float>{1.0f, 0.0f, 1.0f, 0.0f, 0.5f, 0.0f}), data->all().labels);
  // Slicing and gathering keep the labels of an example together.
  Batch batch;
  data->GatherBatch({1, 0}, &batch);
  EXPECT_EQ(3, batch.num_labels);
  EXPECT_EQ((std::vector<float>{0.0f, 0.5f, 0.0f, 1.0f, 0.0f, 1.0f}), batch.labels);
  EXPECT_EQ((std::vector<float>{0.0f, 0.5f, 0.0f}), data->Slice(1, 2).all().labels);
}

TEST_F(DelimitedReadTest, CrlfAndGzipReadLikePlainLines) {
  const auto format = Format("label,cat,dense");
  const std::string lines = "1,a,3\n0,b,\n";
  const std::string crlf = "1,a,3\r\n0,b,\r\n";
  Result<Dataset> plain = ReadTextFiles({Write("a.csv", lines)}, *format, Strict());
  Result<Dataset> windows = ReadTextFiles({Write("b.csv", crlf)}, *format, Strict());
  Result<Dataset> gzip = ReadTextFiles({WriteGzip("c.csv.gz", crlf)}, *format, Strict());
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(windows.ok()) << windows.status();
  ASSERT_TRUE(gzip.ok()) << gzip.status();
  EXPECT_EQ(2, plain->size());
  ExpectSameBatch(plain->all(), windows->all());
  ExpectSameBatch(plain->all(), gzip->all());
}

struct BadLineCase {
  const char* reason;
  std::string line;
  const char* got;
};

std::vector<BadLineCase> BadLineCases() {
  // Schema "y=label,c=cat,n=dense": 3 columns.
  return {
      {"column count", "1,a", "2 columns"},
      {"column count", "1,a,2,3", "4 columns"},
      {"column count", "", "1 columns"},
      {"bad label", ",a,1", "y=\"\""},
      {"bad label", "x,a,1", "y=\"x\""},
      {"bad label", "2,a,1", "y=\"2\""},
      {"bad label", "-1,a,1", "y=\"-1\""},
      {"unparsable number", "1,a,12a", "n=\"12a\""},
      {"unparsable number", "1,a,nan", "n=\"nan\""},
      {"unparsable number", "1,a,inf", "n=\"inf\""},
      {"unparsable number", "1,a, 7", "n=\" 7\""},
      {"line too long", "1,a," + std::string(kMaxLineBytes, '1'), "bytes"},
  };
}

TEST_F(DelimitedReadTest, BadLinesAreCountedByReasonWhenSkipped) {
  const auto format = Format("y=label,c=cat,n=dense");
  for (const BadLineCase& c : BadLineCases()) {
    SCOPED_TRACE(std::string(c.reason) + " got " + c.got);
    Result<Dataset> data = ReadText(*format, "1,a,1\n" + c.line + "\n0,b,2\n");
    ASSERT_TRUE(data.ok()) << data.status();
    EXPECT_EQ((std::vector<float>{1.0f, 0.0f}), data->all().labels);
    EXPECT_EQ(3, data->bad_lines().lines_read);
    EXPECT_EQ((std::map<std::string, int64_t>{{c.reason, 1}}), data->bad_lines().by_reason);
    EXPECT_THAT(data->bad_lines().first_examples,
                ElementsAre(StartsWith(Path("data.txt") + ":2: " + c.reason + " (got ")));
    EXPECT_THAT(data->bad_lines().first_examples[0], HasSubstr(c.got));
  }
}

TEST_F(DelimitedReadTest, BadLineFailsTheReadWhenPolicyIsFail) {
  const auto format = Format("y=label,c=cat,n=dense");
  for (const BadLineCase& c : BadLineCases()) {
    SCOPED_TRACE(std::string(c.reason) + " got " + c.got);
    Result<Dataset> data = ReadText(*format, "1,a,1\n" + c.line + "\n0,b,2\n", Strict());
    ASSERT_FALSE(data.ok());
    EXPECT_EQ(StatusCode::kInvalidArgument, data.status().code());
    EXPECT_THAT(data.status().message(), StartsWith(Path("data.txt") + ":2: " + c.reason));
  }
}

TEST_F(DelimitedReadTest, LargeFileReadsIdenticallyWithOneAndTwoThreads) {
  // About 4 MiB with a header: several pieces, multi-hot bags of 0 to 3.
  std::string text = "click,user,tags,price\n";
  for (int i = 0; i < 150000; ++i) {
    text += std::to_string(i % 7 == 0) + ",u" + std::to_string(i % 1000) + ",";
    for (int k = 0; k < i % 4; ++k) text += (k ? "|t" : "t") + std::to_string((i + k) % 50);
    text.append(",").append(std::to_string(i % 300)).append("\n");
  }
  const std::string path = Write("big.csv", text);
  const auto format = Format("click=label,user=cat,tags=multi,price=dense", ',', true);
  const Dataset one = ReadOnOneAndTwoThreads(path, *format);
  ASSERT_EQ(150000, one.size());
  EXPECT_EQ(3, one.all().BagSize(149999, 1));
}

TEST_F(DelimitedReadTest, CriteoSampleReadAsCsvMatchesTheCriteoReader) {
  const std::string path = SharedDataPath("criteo/criteo_kaggle_8k.tsv");
  if (!FileExists(path)) GTEST_SKIP() << "no shared data at " << path;
  const auto format = Format("label,1-13=dense,14-39=cat", '\t');
  Result<Dataset> csv = ReadTextFiles({path}, *format, Strict());
  Result<Dataset> criteo = ReadCriteoFiles({path}, {});
  ASSERT_TRUE(csv.ok()) << csv.status();
  ASSERT_TRUE(criteo.ok()) << criteo.status();
  EXPECT_EQ(8000, csv->size());
  ExpectSameBatch(criteo->all(), csv->all());
}

TEST_F(DelimitedReadTest, TalkingDataSampleWithTheLeakingColumnsIgnored) {
  const std::string path = SharedDataPath("talkingdata/train_sample.csv");
  if (!FileExists(path)) GTEST_SKIP() << "no shared data at " << path;
  const std::string schema_file = Write("talkingdata.schema",
                                        "# ip,app,device,os,channel,click_time,attributed_time,"
                                        "is_attributed\n"
                                        "ip              cat\n"
                                        "app             cat\n"
                                        "device          cat\n"
                                        "os              cat\n"
                                        "channel         cat\n"
                                        "click_time      ignore\n"
                                        "attributed_time ignore  # leaks the label\n"
                                        "is_attributed   label\n");
  Result<DelimitedSchema> schema = ReadSchemaFile(schema_file);
  ASSERT_TRUE(schema.ok()) << schema.status();
  DelimitedFormatOptions options;
  options.schema = *schema;
  options.header = true;
  Result<std::unique_ptr<TextFormat>> format = NewDelimitedFormat(options);
  ASSERT_TRUE(format.ok()) << format.status();
  TextReadOptions read = Strict();
  read.threads = 2;
  Result<Dataset> data = ReadTextFiles({path}, **format, read);
  ASSERT_TRUE(data.ok()) << data.status();
  const Batch& all = data->all();
  EXPECT_EQ(100000, all.size);
  EXPECT_EQ(100000, data->bad_lines().lines_read);
  EXPECT_EQ(227, CountPositives(all));
  EXPECT_EQ(0, all.num_dense);
  ASSERT_EQ(5, all.num_slots);
  // The README's distinct values: ip, app, device, os, channel.
  EXPECT_EQ(34857u, DistinctKeys(all, 0));
  EXPECT_EQ(161u, DistinctKeys(all, 1));
  EXPECT_EQ(100u, DistinctKeys(all, 2));
  EXPECT_EQ(130u, DistinctKeys(all, 3));
  EXPECT_EQ(161u, DistinctKeys(all, 4));

  // The compact spec with click_time as a categorical column too.
  const auto with_time = Format(
      "is_attributed=label,ip=cat,app=cat,device=cat,os=cat,channel=cat,click_time=cat,"
      "attributed_time=ignore",
      ',', true);
  Result<Dataset> timed = ReadTextFiles({path}, *with_time, Strict());
  ASSERT_TRUE(timed.ok()) << timed.status();
  EXPECT_EQ(227, CountPositives(timed->all()));
  EXPECT_EQ(80350u, DistinctKeys(timed->all(), 5));
}

TEST_F(DelimitedReadTest, MovieLensRatingsWithALabelThreshold) {
  const std::string path = SharedDataPath("movielens-100k/u.data");
  if (!FileExists(path)) GTEST_SKIP() << "no shared data at " << path;
  // user_id \t item_id \t rating \t timestamp, no header; a click is a
  // rating of 4 or 5.
  const auto format =
      Format("user=cat,item=cat,rating=label:threshold=4,timestamp=dense:raw", '\t');
  Result<Dataset> data = ReadTextFiles({path}, *format, Strict());
  ASSERT_TRUE(data.ok()) << data.status();
  const Batch& all = data->all();
  EXPECT_EQ(100000, all.size);
  EXPECT_EQ(21201 + 34174, CountPositives(all));
  EXPECT_EQ(943u, DistinctKeys(all, 0));
  EXPECT_EQ(1682u, DistinctKeys(all, 1));
  const auto [low, high] = std::minmax_element(all.dense.begin(), all.dense.end());
  EXPECT_FLOAT_EQ(874724710.0f, *low);
  EXPECT_FLOAT_EQ(893286638.0f, *high);
}

}  // namespace
}  // namespace ember::io
