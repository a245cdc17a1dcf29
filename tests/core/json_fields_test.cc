#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/json.h"

namespace ember {
namespace {

struct Inner {
  int width = 0;
  std::vector<int> widths;
};

struct Outer {
  std::string name = "dlrm";
  uint64_t seed = 1;
  double rate = 0.5;
  bool on = false;
  Inner inner;
  std::string note = "kept";
};

void to_json(Json& j, const Inner& v) { j = Json{{"width", v.width}, {"widths", v.widths}}; }
void from_json(const Json& j, Inner& v) {
  JsonFields f(j);
  f.Get("width", &v.width);
  f.Get("widths", &v.widths);
  f.Done();
}
void to_json(Json& j, const Outer& v) {
  j = Json{{"name", v.name}, {"seed", v.seed}, {"rate", v.rate},
           {"on", v.on},     {"inner", v.inner}, {"note", v.note}};
}
void from_json(const Json& j, Outer& v) {
  JsonFields f(j);
  f.Get("name", &v.name);
  f.Get("seed", &v.seed);
  f.Get("rate", &v.rate);
  f.Get("on", &v.on);
  f.Get("inner", &v.inner);
  f.Optional("note", &v.note);
  f.Done();
}

Outer Sample() {
  Outer v;
  v.name = "dcn_v2";
  v.seed = 18446744073709551557ull;  // beyond int64: unsigned integers stay exact
  v.rate = 0.1;
  v.on = true;
  v.inner = {7, {512, 256}};
  v.note = "n";
  return v;
}

// The error of reading `text` as an Outer.
std::string ErrorOf(const std::string& text) {
  Result<Json> json = ParseJsonText(text);
  if (!json.ok()) return json.status().message();
  Result<Outer> outer = FromJson<Outer>(*json);
  return outer.ok() ? "ok" : outer.status().message();
}

TEST(JsonFieldsTest, AStructWrittenReadsBackExactlyWithItsFieldOrder) {
  const Json written = Sample();
  EXPECT_EQ("name", written.begin().key());
  Result<Json> parsed = ParseJsonText(written.dump(2));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  Result<Outer> read = FromJson<Outer>(*parsed);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ("dcn_v2", read->name);
  EXPECT_EQ(18446744073709551557ull, read->seed);
  EXPECT_EQ(0.1, read->rate);  // shortest round trip: the same double
  EXPECT_TRUE(read->on);
  EXPECT_EQ(7, read->inner.width);
  EXPECT_EQ((std::vector<int>{512, 256}), read->inner.widths);
  EXPECT_EQ("n", read->note);
}

TEST(JsonFieldsTest, AnOptionalFieldAbsentKeepsItsDefault) {
  Json j = Sample();
  j.erase("note");
  Result<Outer> read = FromJson<Outer>(j);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ("kept", read->note);
}

TEST(JsonFieldsTest, ErrorsNameTheFieldByItsPath) {
  Json j = Sample();
  j.erase("rate");
  EXPECT_EQ("field \"rate\" is missing", ErrorOf(j.dump()));
  j = Sample();
  j["inner"]["extra"] = 1;
  EXPECT_EQ("field \"inner.extra\" is not a known field", ErrorOf(j.dump()));
  j = Sample();
  j["inner"]["widths"][1] = "wide";
  EXPECT_EQ("field \"inner.widths[1]\" is not an integer", ErrorOf(j.dump()));
  j = Sample();
  j["inner"]["width"] = 1.5;
  EXPECT_EQ("field \"inner.width\" is not an integer", ErrorOf(j.dump()));
  j = Sample();
  j["inner"]["width"] = int64_t{1} << 40;
  EXPECT_EQ("field \"inner.width\" is out of range", ErrorOf(j.dump()));
  j = Sample();
  j["seed"] = -1;
  EXPECT_EQ("field \"seed\" is negative", ErrorOf(j.dump()));
  j = Sample();
  j["on"] = 1;
  EXPECT_EQ("field \"on\" is not true or false", ErrorOf(j.dump()));
  j = Sample();
  j["inner"] = Json::array();
  EXPECT_EQ("field \"inner\" is not an object", ErrorOf(j.dump()));
  EXPECT_EQ("the document is not an object", ErrorOf("[1]"));
}

TEST(JsonFieldsTest, MalformedTextIsAStatusWithTheOffset) {
  Result<Json> parsed = ParseJsonText("{\"a\": ");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(std::string::npos, parsed.status().message().find("near byte")) << parsed.status();
  std::string deep;
  for (int i = 0; i < 40; ++i) deep += "[";
  EXPECT_FALSE(ParseJsonText(deep).ok());
}

TEST(JsonFieldsTest, ADoubleWrittenAsNullReadsBackAsNaN) {
  // nlohmann writes a NaN (or an infinity) as null.
  Json j = Sample();
  j["rate"] = std::numeric_limits<double>::quiet_NaN();
  Result<Json> parsed = ParseJsonText(j.dump());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE((*parsed)["rate"].is_null());
  Result<Outer> read = FromJson<Outer>(*parsed);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(std::isnan(read->rate));
}

TEST(JsonFieldsTest, AFilesErrorsNameItWithTheLineAndColumnOrTheField) {
  Result<Json> parsed = ParseJsonText("{\n  \"a\": ,\n}", "f.json");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(0u, parsed.status().message().find("f.json:2:8: malformed JSON (malformed JSON near "
                                               "byte 9: "))
      << parsed.status();
  Json j = Sample();
  j.erase("rate");
  Result<Outer> read = FromJsonText<Outer>(j.dump(2), "f.json");
  ASSERT_FALSE(read.ok());
  EXPECT_EQ("f.json: field \"rate\" is missing", read.status().message());
  read = FromJsonText<Outer>(Json(Sample()).dump(2), "f.json");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ("dcn_v2", read->name);
}

struct Keyed {
  std::vector<std::pair<std::string, int>> widths;
};
void from_json(const Json& j, Keyed& v) {
  JsonFields f(j);
  f.Get("widths", &v.widths);
  f.Done();
}

TEST(JsonFieldsTest, AnObjectReadsAsKeyedPairsInItsOrder) {
  Result<Keyed> read = FromJson<Keyed>(Json::parse(R"({"widths": {"top": 2, "bottom": 1}})"));
  ASSERT_TRUE(read.ok()) << read.status();
  using Pair = std::pair<std::string, int>;
  EXPECT_EQ((std::vector<Pair>{{"top", 2}, {"bottom", 1}}), read->widths);
  read = FromJson<Keyed>(Json::parse(R"({"widths": {"top": 2.5}})"));
  EXPECT_EQ("field \"widths.top\" is not an integer", read.status().message());
  read = FromJson<Keyed>(Json::parse(R"({"widths": [2]})"));
  EXPECT_EQ("field \"widths\" is not an object", read.status().message());
}

TEST(JsonFieldsTest, JsonTextReplacesBytesThatAreNotUtf8) {
  EXPECT_EQ("{\"a\":\"x\xEF\xBF\xBDy\"}", JsonText(Json{{"a", "x\xFFy"}}));
  EXPECT_EQ("{\n  \"a\": 1\n}", JsonText(Json{{"a", 1}}, 2));
}

struct Point {
  int x = 0;
  std::map<std::string, int64_t> counts;
};
constexpr auto kPointFields = [](auto& p, auto&& field) {
  field("x", p.x);
  field("counts", p.counts);
};
void to_json(Json& j, const Point& p) { WriteJsonFields(j, p, kPointFields); }
void from_json(const Json& j, Point& p) { ReadJsonFields(j, p, kPointFields); }

TEST(JsonFieldsTest, OneListOfFieldsWritesAndReadsAStructStrictly) {
  const Point written{3, {{"b", 2}, {"a", 1}}};
  EXPECT_EQ(R"({"x":3,"counts":{"a":1,"b":2}})", Json(written).dump());
  Result<Point> read = FromJson<Point>(Json(written));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(3, read->x);
  EXPECT_EQ(written.counts, read->counts);
  EXPECT_EQ("field \"counts\" is missing", FromJson<Point>(Json{{"x", 1}}).status().message());
  EXPECT_EQ("field \"counts.a\" is not an integer",
            FromJson<Point>(Json::parse(R"({"x": 1, "counts": {"a": 0.5}})")).status().message());
  EXPECT_EQ("field \"y\" is not a known field",
            FromJson<Point>(Json::parse(R"({"x": 1, "counts": {}, "y": 2})")).status().message());
}

}  // namespace
}  // namespace ember
