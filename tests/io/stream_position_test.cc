// StreamPosition as JSON (io/stream_position.cc): positions written before
// positions serialized with nlohmann (tests/io/testdata) still load, and a
// missing or unknown field is an error naming it.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/file.h"
#include "core/json.h"
#include "io/elastic_stream_source.h"
#include "io/stream_reader.h"

namespace ember::io {
namespace {

std::string TestData(const std::string& name) {
  Result<std::string> text = ReadFile(std::string(EMBER_IO_TESTDATA) + "/" + name);
  EXPECT_TRUE(text.ok()) << text.status();
  std::string line = text.ok() ? *text : "";
  if (!line.empty() && line.back() == '\n') line.pop_back();
  return line;
}

TEST(StreamPositionTest, APositionWrittenByTheOlderWriterLoadsWithItsValues) {
  const std::string text = TestData("stream_position.json");
  Result<StreamPosition> p = StreamPosition::Parse(text);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ("criteo \"tsv\"", p->input);
  EXPECT_EQ(3, p->num_files);
  EXPECT_EQ(18446744073709551557ull, p->files_fingerprint);
  EXPECT_EQ(1048576, p->piece_size);
  EXPECT_EQ(12345678901234567890ull, p->seed);
  EXPECT_TRUE(p->shuffle_files);
  EXPECT_TRUE(p->shuffle_pieces);
  EXPECT_EQ(4096, p->shuffle_buffer);
  EXPECT_EQ(2, p->num_shards);
  EXPECT_EQ(1, p->shard_index);
  EXPECT_FALSE(p->equal_shards);
  EXPECT_EQ(256, p->batch_size);
  EXPECT_TRUE(p->drop_last);
  EXPECT_EQ("fail", p->bad_line_policy);
  EXPECT_EQ(2, p->epoch);
  EXPECT_TRUE(p->epoch_started);
  EXPECT_EQ(17, p->batches_in_epoch);
  EXPECT_EQ(4352, p->records_out);
  EXPECT_EQ(5, p->piece);
  EXPECT_EQ(33, p->piece_row);
  EXPECT_EQ(4, p->counted_through);
  EXPECT_EQ(4400, p->records_in);
  EXPECT_FALSE(p->input_done);
  EXPECT_TRUE(p->cycling);
  EXPECT_EQ(9000, p->first_pass_records);
  EXPECT_EQ(3, p->replay_piece);
  EXPECT_EQ(7, p->replay_row);
  EXPECT_EQ(4100, p->replay_input);
  EXPECT_EQ(2, p->drain_step);
  EXPECT_EQ(2, p->last_epoch);
  EXPECT_EQ(16, p->last_batch_in_epoch);
  EXPECT_EQ(13000, p->records_delivered);
  EXPECT_EQ(51, p->batches_delivered);
  EXPECT_EQ(12, p->padded_for_equal_shards);
  EXPECT_EQ(1, p->dropped_for_equal_shards);
  EXPECT_EQ(13100, p->bad_lines.lines_read);
  EXPECT_EQ(9, p->bad_lines.bad_lines);
  EXPECT_EQ((std::map<std::string, int64_t>{{"bad label", 3}, {"too few columns", 6}}),
            p->bad_lines.by_reason);
  EXPECT_EQ((std::vector<std::string>{"a.tsv:12: too few columns", "b.tsv:3: bad label \"x\"\t"}),
            p->bad_lines.first_examples);
  // Written again, the same line.
  EXPECT_EQ(text, p->Serialize());
}

TEST(StreamPositionTest, AReshardedPositionWrittenByTheOlderWriterLoads) {
  const std::string text = TestData("resharded_stream_position.json");
  // A resharded position passes through a second resharding unchanged.
  Result<std::string> again = ReshardedStreamPosition({text, text});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(text, *again);
  Result<std::string> bad = ReshardedStreamPosition({R"({"resharded_stream": [], "extra": 1})"});
  EXPECT_THAT(bad.status().message(), ::testing::HasSubstr("\"extra\" is not a known field"));
}

TEST(StreamPositionTest, AMissingOrUnknownFieldIsAnErrorNamingIt) {
  Result<Json> json = ParseJsonText(TestData("stream_position.json"));
  ASSERT_TRUE(json.ok()) << json.status();
  Json edited = *json;
  edited.erase("piece_row");
  EXPECT_EQ("reader position: field \"piece_row\" is missing",
            StreamPosition::Parse(edited.dump()).status().message());
  edited = *json;
  edited["bad_lines"]["by_file"] = Json::object();
  EXPECT_EQ("reader position: field \"bad_lines.by_file\" is not a known field",
            StreamPosition::Parse(edited.dump()).status().message());
  edited = *json;
  edited["seed"] = -1;
  EXPECT_EQ("reader position: field \"seed\" is negative",
            StreamPosition::Parse(edited.dump()).status().message());
  edited = *json;
  edited["version"] = 2;
  EXPECT_EQ("reader position: field \"version\" is 2; expected 1",
            StreamPosition::Parse(edited.dump()).status().message());
}

}  // namespace
}  // namespace ember::io
