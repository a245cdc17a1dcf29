#include "core/json.h"

#include <cstdint>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ember {
namespace {

using ::testing::HasSubstr;

TEST(JsonTest, ParsesEveryKindOfValueKeepingTheFieldOrder) {
  Result<JsonValue> parsed =
      ParseJson(R"( {"b": 1, "a": [true, false, null, "x\n\"\u00e9"], "c": {"d": -2.5e-3}} )");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const JsonValue& root = *parsed;
  ASSERT_EQ(JsonValue::Type::kObject, root.type);
  ASSERT_EQ(3u, root.fields.size());
  EXPECT_EQ("b", root.fields[0].first);
  EXPECT_EQ("a", root.fields[1].first);
  EXPECT_EQ("c", root.fields[2].first);
  EXPECT_EQ("1", root.Find("b")->text);
  const JsonValue& a = *root.Find("a");
  ASSERT_EQ(JsonValue::Type::kArray, a.type);
  ASSERT_EQ(4u, a.items.size());
  EXPECT_EQ(JsonValue::Type::kBool, a.items[0].type);
  EXPECT_TRUE(a.items[0].boolean);
  EXPECT_FALSE(a.items[1].boolean);
  EXPECT_EQ(JsonValue::Type::kNull, a.items[2].type);
  EXPECT_EQ("x\n\"\xc3\xa9", a.items[3].text);  // é in UTF-8
  const JsonValue* d = root.Find("c")->Find("d");
  ASSERT_NE(nullptr, d);
  EXPECT_EQ(JsonValue::Type::kNumber, d->type);
  EXPECT_EQ(-2.5e-3, std::stod(d->text));
  EXPECT_EQ(nullptr, root.Find("missing"));
}

TEST(JsonTest, IntegersAreExactAtTheEndsOfTheirRange) {
  Result<JsonValue> parsed = ParseJson("[18446744073709551615, -9223372036854775808, 0]");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ("18446744073709551615", parsed->items[0].text);
  EXPECT_EQ("-9223372036854775808", parsed->items[1].text);
  EXPECT_EQ("0", parsed->items[2].text);
}

TEST(JsonTest, MalformedDocumentsAreRefusedNamingTheByte) {
  for (const char* text : {"{\"a\": 1,}", "[1, 2", "1-2", "{\"a\" 1}", "", "nul", "[] []"}) {
    SCOPED_TRACE(text);
    Result<JsonValue> parsed = ParseJson(text);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(StatusCode::kInvalidArgument, parsed.status().code());
    EXPECT_THAT(parsed.status().message(), HasSubstr("malformed JSON near byte"));
  }
}

TEST(JsonTest, DeepNestingIsRefused) {
  const auto nested = [](int levels) {
    return std::string(levels, '[') + std::string(levels, ']');
  };
  EXPECT_TRUE(ParseJson(nested(10)).ok());
  Result<JsonValue> deep = ParseJson(nested(1000));
  ASSERT_FALSE(deep.ok());
  EXPECT_THAT(deep.status().message(), HasSubstr("nested deeper than 16"));
}

TEST(JsonTest, QuotedStringsReadBackAsThemselves) {
  for (const std::string& text : {std::string("plain"), std::string("quote \" and \\ slash /"),
                                  std::string("tab\tnewline\ncr\r"), std::string("\x01\x1f", 2),
                                  std::string("caf\xc3\xa9"), std::string()}) {
    const std::string quoted = JsonQuote(text);
    Result<JsonValue> parsed = ParseJson(quoted);
    ASSERT_TRUE(parsed.ok()) << quoted << ": " << parsed.status();
    EXPECT_EQ(text, parsed->text) << quoted;
  }
}

TEST(JsonTest, BytesThatAreNotUtf8AreQuotedAsValidJson) {
  const std::string quoted = JsonQuote(std::string("a\xff") + "b");
  Result<JsonValue> parsed = ParseJson(quoted);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(std::string("a\xef\xbf\xbd") + "b", parsed->text);  // U+FFFD for the byte
}

TEST(JsonTest, AnObjectBuiltFieldByFieldParsesBack) {
  JsonObject inner;
  inner.Add("n", int64_t{-7});
  JsonObject object;
  object.Add("auc", 0.75).Add("model", "dlrm \"x\"").Add("ok", true).Add("inner", inner);
  object.AddRaw("list", JsonNumberArray({1.5, 2}));
  for (int indent : {-1, 2}) {
    Result<JsonValue> parsed = ParseJson(object.ToString(indent));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(0.75, std::stod(parsed->Find("auc")->text));
    EXPECT_EQ("dlrm \"x\"", parsed->Find("model")->text);
    EXPECT_TRUE(parsed->Find("ok")->boolean);
    EXPECT_EQ("-7", parsed->Find("inner")->Find("n")->text);
    ASSERT_EQ(2u, parsed->Find("list")->items.size());
    EXPECT_EQ(5u, parsed->fields.size());
  }
}

}  // namespace
}  // namespace ember
