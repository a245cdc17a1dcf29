// The contract every registered text format (io/text_format_registry.h) is
// held to, on the example its entry gives: it reads, its spec round-trips
// through JSON to the same format, a bad line is named with its file and
// line, and a stream of it resumes where it stopped.

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/json.h"
#include "io/format_spec.h"
#include "io/stream_reader.h"
#include "io/text_format_registry.h"
#include "tests/io/text_fixture.h"

namespace ember::io {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> RegisteredNames() { return DefaultTextFormatRegistry().Names(); }

class TextFormatContractTest : public TextFormatTest,
                               public ::testing::WithParamInterface<std::string> {
 protected:
  const TextFormatEntry& Entry() const {
    Result<const TextFormatEntry*> entry = DefaultTextFormatRegistry().Find(GetParam());
    EXPECT_TRUE(entry.ok()) << entry.status();
    return **entry;
  }
  std::unique_ptr<TextFormat> Format(const FormatSpec& spec) const {
    Result<std::unique_ptr<TextFormat>> format = MakeTextFormat(spec);
    EXPECT_TRUE(format.ok()) << format.status();
    return format.ok() ? *std::move(format) : nullptr;
  }
  // `text` with `line` inserted after its first line.
  static std::string WithSecondLine(const std::string& text, const std::string& line) {
    const size_t end = text.find('\n') + 1;
    return text.substr(0, end) + line + "\n" + text.substr(end);
  }
};

TEST_P(TextFormatContractTest, ItsExampleReadsToItsRowsOnOneAndTwoThreads) {
  const TextFormatEntry& entry = Entry();
  auto format = Format(entry.example_spec);
  ASSERT_NE(nullptr, format);
  EXPECT_EQ(GetParam(), format->name());
  const Dataset data = ReadOnOneAndTwoThreads(Write("example.txt", entry.example_text), *format);
  EXPECT_EQ(entry.example_rows, data.size());
  EXPECT_EQ(format->layout().num_labels, data.num_labels());
  EXPECT_EQ(format->layout().num_dense, data.num_dense());
  EXPECT_EQ(format->layout().num_slots, data.num_slots());
}

TEST_P(TextFormatContractTest, ItsSpecRoundTripsThroughJsonToTheSameFormat) {
  const TextFormatEntry& entry = Entry();
  const Json written = entry.example_spec;
  Result<Json> parsed = ParseJsonText(written.dump(2));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  Result<FormatSpec> read = FromJson<FormatSpec>(*parsed);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(written.dump(), Json(*read).dump());
  auto before = Format(entry.example_spec);
  auto after = Format(*read);
  ASSERT_NE(nullptr, before);
  ASSERT_NE(nullptr, after);
  Result<Dataset> one = ReadText(*before, entry.example_text, Strict());
  Result<Dataset> two = ReadText(*after, entry.example_text, Strict());
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(two.ok()) << two.status();
  ExpectSameBatch(one->all(), two->all());
}

TEST_P(TextFormatContractTest, AnUnknownOrMissingJsonFieldIsNamed) {
  Json json = Entry().example_spec;
  json["schemas"] = "x";
  EXPECT_THAT(FromJson<FormatSpec>(json).status().message(), HasSubstr("\"schemas\""));
  json = Entry().example_spec;
  json.erase("slot_bits");
  EXPECT_THAT(FromJson<FormatSpec>(json).status().message(), HasSubstr("\"slot_bits\""));
}

TEST_P(TextFormatContractTest, ABadLineIsNamedWithItsFileAndLine) {
  const TextFormatEntry& entry = Entry();
  auto format = Format(entry.example_spec);
  ASSERT_NE(nullptr, format);
  const std::string path =
      Write("bad.txt", WithSecondLine(entry.example_text, std::string("1\0bad", 5)));
  Result<Dataset> data = ReadTextFiles({path}, *format, Strict());
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(StatusCode::kInvalidArgument, data.status().code());
  EXPECT_THAT(data.status().message(), HasSubstr(path + ":2: binary data"));
}

TEST_P(TextFormatContractTest, AStreamResumesWhereItStopped) {
  const TextFormatEntry& entry = Entry();
  auto format = Format(entry.example_spec);
  ASSERT_NE(nullptr, format);
  const std::string path = Write("stream.txt", entry.example_text);
  StreamReaderOptions options;
  options.batch_size = 1;
  options.num_epochs = 2;
  options.piece_bytes = 16;  // several pieces, so that the position is inside the file
  options.shuffle_pieces = true;
  options.bad_lines = BadLinePolicy::kFail;
  const auto rest = [](StreamReader& reader) {
    Batch all, batch;
    bool first = true;
    while (true) {
      Result<bool> more = reader.Next(&batch);
      EXPECT_TRUE(more.ok()) << more.status();
      if (!more.ok() || !*more) return all;
      if (first) all = batch;
      else AppendBatch(batch, &all);
      first = false;
    }
  };
  Result<std::unique_ptr<StreamReader>> reader = StreamReader::OpenText({path}, *format, options);
  ASSERT_TRUE(reader.ok()) << reader.status();
  Batch batch;
  ASSERT_TRUE((*reader)->Next(&batch).ok());
  Result<std::string> position = (*reader)->ResumePosition();
  ASSERT_TRUE(position.ok()) << position.status();
  const Batch expected = rest(**reader);
  EXPECT_EQ(2 * entry.example_rows - 1, expected.size);

  Result<std::unique_ptr<StreamReader>> resumed = StreamReader::OpenText({path}, *format, options);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_TRUE((*resumed)->ResumeFrom(*position).ok());
  ExpectSameBatch(expected, rest(**resumed));
}

INSTANTIATE_TEST_SUITE_P(AllTextFormats, TextFormatContractTest,
                         ::testing::ValuesIn(RegisteredNames()),
                         [](const auto& info) { return info.param; });

TEST(TextFormatRegistryTest, ANewFormatRegistersAndBuildsByName) {
  TextFormatRegistry registry;
  TextFormatEntry entry;
  entry.name = "tsv";
  EXPECT_THAT(registry.Register(entry).message(), HasSubstr("no factory"));
  entry.make = [](const FormatSpec&) -> Result<std::unique_ptr<TextFormat>> {
    return Status::Unimplemented("never built");
  };
  EXPECT_THAT(registry.Register(entry).message(), HasSubstr("example"));
  entry.example_spec.name = "tsv";
  entry.example_rows = 1;
  entry.options = {"schemas"};
  EXPECT_THAT(registry.Register(entry).message(), HasSubstr("\"schemas\""));
  entry.options = {"delimiter"};
  ASSERT_TRUE(registry.Register(entry).ok());
  EXPECT_EQ(StatusCode::kAlreadyExists, registry.Register(entry).code());
  EXPECT_EQ(std::vector<std::string>{"tsv"}, registry.Names());
  EXPECT_THAT(registry.Find("csv").status().message(),
              HasSubstr("unknown text format \"csv\" (expected tsv)"));
}

TEST(TextFormatRegistryTest, TheOptionKeysOfTheBuiltinFormatsAreTheirFlags) {
  EXPECT_EQ((std::vector<std::string>{"schema", "schema_file", "delimiter", "header",
                                      "dense_transform", "dense_min", "dense_max",
                                      "field_starts", "num_fields", "require_binary_values",
                                      "slots", "dense_slots", "label_slots", "feasign_first",
                                      "ignore_unknown_slots"}),
            TextFormatOptionKeys());
  EXPECT_EQ("criteo, csv, libsvm, libffm or slot", TextFormatNameList());
}

}  // namespace
}  // namespace ember::io
