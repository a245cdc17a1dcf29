#include "core/json.h"

#include <cstdint>
#include <limits>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ember {
namespace {

using ::testing::HasSubstr;

TEST(JsonTest, IntegersAreExactAtTheEndsOfTheirRange) {
  Result<Json> parsed = ParseJsonText("[18446744073709551615, -9223372036854775808, 0]");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(uint64_t{18446744073709551615u}, (*parsed)[0].get<uint64_t>());
  EXPECT_EQ(std::numeric_limits<int64_t>::min(), (*parsed)[1].get<int64_t>());
  EXPECT_EQ("[18446744073709551615,-9223372036854775808,0]", JsonText(*parsed));
}

TEST(JsonTest, MalformedDocumentsAreRefusedNamingTheByte) {
  for (const char* text : {"{\"a\": 1,}", "[1, 2", "1-2", "{\"a\" 1}", "", "nul", "[] []"}) {
    SCOPED_TRACE(text);
    Result<Json> parsed = ParseJsonText(text);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(StatusCode::kInvalidArgument, parsed.status().code());
    EXPECT_THAT(parsed.status().message(), HasSubstr("malformed JSON near byte"));
  }
}

TEST(JsonTest, DeepNestingIsRefused) {
  const auto nested = [](int levels) {
    return std::string(levels, '[') + std::string(levels, ']');
  };
  EXPECT_TRUE(ParseJsonText(nested(10)).ok());
  Result<Json> deep = ParseJsonText(nested(1000));
  ASSERT_FALSE(deep.ok());
  EXPECT_THAT(deep.status().message(), HasSubstr("nested deeper than 16"));
}

TEST(JsonTest, StringsWrittenReadBackAsThemselves) {
  for (const std::string& text : {std::string("plain"), std::string("quote \" and \\ slash /"),
                                  std::string("tab\tnewline\ncr\r"), std::string("\x01\x1f", 2),
                                  std::string("caf\xc3\xa9"), std::string()}) {
    const std::string quoted = JsonText(Json(text));
    Result<Json> parsed = ParseJsonText(quoted);
    ASSERT_TRUE(parsed.ok()) << quoted << ": " << parsed.status();
    EXPECT_EQ(text, parsed->get<std::string>()) << quoted;
  }
}

TEST(JsonTest, BytesThatAreNotUtf8AreQuotedAsValidJson) {
  const std::string quoted = JsonText(Json(std::string("a\xff") + "b"));
  Result<Json> parsed = ParseJsonText(quoted);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(std::string("a\xef\xbf\xbd") + "b", parsed->get<std::string>());  // U+FFFD
}

TEST(JsonTest, ObjectsKeepTheirFieldOrderAndNonFiniteNumbersBecomeNull) {
  const Json object = {{"test", {{"auc", 0.75}, {"examples", int64_t{1600}}}},
                       {"name", "a\"b\n"},
                       {"ok", true},
                       {"x", std::numeric_limits<double>::infinity()}};
  EXPECT_EQ("{\"test\":{\"auc\":0.75,\"examples\":1600},\"name\":\"a\\\"b\\n\",\"ok\":true,"
            "\"x\":null}",
            JsonText(object));
}

}  // namespace
}  // namespace ember
