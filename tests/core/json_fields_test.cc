#include <cstdint>
#include <string>
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

}  // namespace
}  // namespace ember
