#include "io/format_spec.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "io/feature_hash.h"
#include "tests/io/text_fixture.h"

namespace ember::io {
namespace {

using ::testing::HasSubstr;

class FormatSpecTest : public TextFormatTest {};

TEST_F(FormatSpecTest, EachNameBuildsItsFormatWithItsLayout) {
  struct Case {
    FormatSpec spec;
    const char* name;
    TextLayout layout;
  };
  FormatSpec criteo;
  FormatSpec csv;
  csv.name = "csv";
  csv.schema = "label,dense,cat,multi,label";
  FormatSpec libsvm;
  libsvm.name = "libsvm";
  libsvm.field_starts = "0,957,5039";
  FormatSpec libffm;
  libffm.name = "libffm";
  libffm.num_fields = 4;
  FormatSpec slot;
  slot.name = "slot";
  slot.slots = "1-26";
  slot.dense_slots = "dense_feature:13";
  slot.label_slots = "click";
  const Case cases[] = {
      {criteo, "criteo", {1, 13, 26}}, {csv, "csv", {2, 1, 2}},     {libsvm, "libsvm", {1, 0, 3}},
      {libffm, "libffm", {1, 0, 4}},   {slot, "slot", {1, 13, 26}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result<std::unique_ptr<TextFormat>> format = MakeTextFormat(c.spec);
    ASSERT_TRUE(format.ok()) << format.status();
    EXPECT_STREQ(c.name, (*format)->name());
    EXPECT_EQ(c.layout.num_labels, (*format)->layout().num_labels);
    EXPECT_EQ(c.layout.num_dense, (*format)->layout().num_dense);
    EXPECT_EQ(c.layout.num_slots, (*format)->layout().num_slots);
  }
}

TEST_F(FormatSpecTest, CsvTakesASchemaFileDelimiterAndHeader) {
  FormatSpec spec;
  spec.name = "csv";
  spec.schema_file = Write("s.schema", "y label\nuser cat\nprice dense raw\n");
  spec.delimiter = "pipe";
  spec.header = true;
  Result<std::unique_ptr<TextFormat>> format = MakeTextFormat(spec);
  ASSERT_TRUE(format.ok()) << format.status();
  EXPECT_TRUE((*format)->has_header());
  Result<Dataset> data = ReadText(**format, "price|y|user\n2.5|1|u7\n", Strict());
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(std::vector<float>{1.0f}, data->all().labels);
  EXPECT_EQ(std::vector<float>{2.5f}, data->all().dense);
  EXPECT_EQ(std::vector<Key>{HashCategorical(0, "u7")}, data->all().keys);
}

TEST_F(FormatSpecTest, RejectsUnknownNamesMisplacedFieldsAndBadValues) {
  struct Case {
    FormatSpec spec;
    const char* message;
  };
  std::vector<Case> cases;
  auto add = [&](const char* name, const char* message, auto&& set) {
    FormatSpec spec;
    spec.name = name;
    set(spec);
    cases.push_back({spec, message});
  };
  add("tsv", "unknown text format \"tsv\"", [](FormatSpec&) {});
  add("criteo", "schema does not apply to the criteo format",
      [](FormatSpec& s) { s.schema = "label"; });
  add("criteo", "slot_bits must be in [5, 32]", [](FormatSpec& s) { s.slot_bits = 4; });
  add("libsvm", "num_fields does not apply", [](FormatSpec& s) { s.num_fields = 3; });
  add("libffm", "field_starts does not apply", [](FormatSpec& s) { s.field_starts = "0"; });
  add("slot", "header does not apply", [](FormatSpec& s) {
    s.slots = "a";
    s.header = true;
  });
  add("libsvm", "dense_defaults does not apply",
      [](FormatSpec& s) { s.dense_defaults.transform = DenseTransform::kRaw; });
  add("csv", "slots does not apply", [](FormatSpec& s) {
    s.schema = "label";
    s.slots = "a";
  });
  add("csv", "exactly one of schema and schema_file", [](FormatSpec&) {});
  add("csv", "exactly one of schema and schema_file", [](FormatSpec& s) {
    s.schema = "label";
    s.schema_file = "x";
  });
  add("csv", "unknown role", [](FormatSpec& s) { s.schema = "label,x=bogus"; });
  add("csv", "a delimiter is one byte", [](FormatSpec& s) {
    s.schema = "label";
    s.delimiter = "ab";
  });
  add("libsvm", "field_starts must be unsigned integers",
      [](FormatSpec& s) { s.field_starts = "0,x"; });
  add("libsvm", "field_starts must increase", [](FormatSpec& s) { s.field_starts = "5,1"; });
  add("libffm", "num_fields >= 1", [](FormatSpec&) {});
  add("slot", "at least one sparse or dense slot", [](FormatSpec&) {});
  add("slot", "bad dense slot", [](FormatSpec& s) { s.dense_slots = "d:0"; });
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    Result<std::unique_ptr<TextFormat>> format = MakeTextFormat(c.spec);
    ASSERT_FALSE(format.ok());
    EXPECT_EQ(StatusCode::kInvalidArgument, format.status().code());
    EXPECT_THAT(format.status().message(), HasSubstr(c.message));
  }
  FormatSpec missing;
  missing.name = "csv";
  missing.schema_file = Path("missing.schema");
  EXPECT_EQ(StatusCode::kNotFound, MakeTextFormat(missing).status().code());
}

}  // namespace
}  // namespace ember::io
