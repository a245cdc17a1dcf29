#include "engine/model_params.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "core/json.h"

namespace ember::engine {
namespace {

TEST(ModelParamsTest, SetReplacesAndKeepsTheOrderOfFirstSetting) {
  ModelParams params;
  params.Set("b", 1).Set("a", std::vector<int>{4, 2}).Set("b", 3);
  ASSERT_EQ(2u, params.values().size());
  EXPECT_EQ("b", params.values()[0].first);
  EXPECT_EQ(3, params.Int("b"));
  EXPECT_EQ((std::vector<int>{4, 2}), params.WidthList("a"));
  EXPECT_EQ(nullptr, params.Find("c"));
}

TEST(ModelParamsTest, EachKindFormatsAndParsesBackAsItsFlagHoldsIt) {
  const std::vector<ModelParamValue> values = {7, 1.25, 0.01, std::string("bottom"),
                                               std::vector<int>{512, 256, 64},
                                               std::vector<int>{}};
  for (const ModelParamValue& value : values) {
    const std::string text = FormatModelParamValue(value);
    Result<ModelParamValue> parsed = ParseModelParamValue("p", KindOf(value), text);
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status();
    EXPECT_EQ(value, *parsed) << text;
  }
  EXPECT_EQ("512,256,64", FormatModelParamValue(std::vector<int>{512, 256, 64}));
  EXPECT_EQ("1.25", FormatModelParamValue(1.25));
}

TEST(ModelParamsTest, AValueOfTheWrongFormNamesTheFlag) {
  Result<ModelParamValue> word = ParseModelParamValue("cross_layers", ModelParamKind::kInt, "x");
  EXPECT_EQ("--cross_layers=x: expected an integer", word.status().message());
  Result<ModelParamValue> empty = ParseModelParamValue("factor", ModelParamKind::kDouble, "");
  EXPECT_EQ("--factor=: expected a number", empty.status().message());
  Result<ModelParamValue> widths =
      ParseModelParamValue("bottom_mlp", ModelParamKind::kWidths, "64,x");
  EXPECT_EQ("--bottom_mlp=64,x: 'x' is not a positive integer", widths.status().message());
  EXPECT_FALSE(ParseModelParamValue("bottom_mlp", ModelParamKind::kWidths, "64,0").ok());
}

TEST(ModelParamsTest, CheckConvertsIntegersToNumbersAndRunsTheDeclaredCheck) {
  const ModelParamSpec factor{"factor", 1.5, "a factor", InRange(0.0, 4.0, /*low_open=*/true)};
  Result<ModelParamValue> two = CheckModelParam(factor, 2);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(ModelParamValue(2.0), *two);
  EXPECT_EQ("--factor=0: must be > 0 and at most 4", CheckModelParam(factor, 0.0).status().message());
  EXPECT_EQ("--factor takes a number, got a string",
            CheckModelParam(factor, std::string("x")).status().message());

  const ModelParamSpec layers{"layers", 3, "layers", AtLeast(0)};
  EXPECT_TRUE(CheckModelParam(layers, 0).ok());
  EXPECT_EQ("--layers=-1: must be >= 0", CheckModelParam(layers, -1).status().message());
  EXPECT_EQ("--layers takes an integer, got a number", CheckModelParam(layers, 1.0).status().message());

  const ModelParamSpec gate{"gate", std::string("a"), "gate", OneOf({"a", "b"})};
  EXPECT_TRUE(CheckModelParam(gate, std::string("b")).ok());
  EXPECT_EQ("--gate=c: must be a or b", CheckModelParam(gate, std::string("c")).status().message());

  const ModelParamSpec mlp{"mlp", std::vector<int>{4}, "mlp", Widths(1)};
  EXPECT_EQ("--mlp=: needs a width", CheckModelParam(mlp, std::vector<int>{}).status().message());
  EXPECT_EQ("--mlp=4,0: widths must be positive, got 0",
            CheckModelParam(mlp, std::vector<int>{4, 0}).status().message());

  const ModelParamSpec weight{"weight", 0.01, "w",
                              InRange(0.0, std::numeric_limits<double>::max(), false)};
  EXPECT_TRUE(CheckModelParam(weight, 0.0).ok());
  EXPECT_EQ("--weight=-1: must be finite and >= 0", CheckModelParam(weight, -1.0).status().message());
}

TEST(ModelParamsTest, JsonRoundTripsEachKindAndRefusesAnother) {
  const std::vector<ModelParamValue> values = {7, 0.1, std::string("w"), std::vector<int>{3, 2}};
  for (const ModelParamValue& value : values) {
    const Json json = ModelParamJson(value);
    EXPECT_EQ(value, ModelParamFromJson(Json::parse(json.dump()), KindOf(value))) << json.dump();
  }
  EXPECT_EQ(ModelParamValue(2.0), ModelParamFromJson(Json(2), ModelParamKind::kDouble));
  EXPECT_THROW(ModelParamFromJson(Json("3"), ModelParamKind::kInt), JsonFieldError);
  EXPECT_THROW(ModelParamFromJson(Json(1.5), ModelParamKind::kInt), JsonFieldError);
  EXPECT_THROW(ModelParamFromJson(Json(3), ModelParamKind::kWidths), JsonFieldError);
  EXPECT_THROW(ModelParamFromJson(Json::array({1, "x"}), ModelParamKind::kWidths), JsonFieldError);
}

}  // namespace
}  // namespace ember::engine
