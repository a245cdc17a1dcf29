#include "tools/model_flags.h"

#include <gflags/gflags.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/model_registry.h"

namespace ember::tools {
namespace {

using ::testing::HasSubstr;

class ModelFlagsTest : public ::testing::Test {
 protected:
  void SetUp() override { DefineModelFlags(); }
  gflags::FlagSaver saver_;  // Flags set by a test are restored after it.
};

// Every parameter of every registered model has a flag, of its default,
// whose help names the models that read it; a second definition is none.
TEST_F(ModelFlagsTest, EveryModelsParametersHaveAFlagOfTheirDefault) {
  DefineModelFlags();
  std::vector<std::string> declared;
  for (const engine::ModelSpec* spec : engine::DefaultModelRegistry().Specs()) {
    for (const engine::ModelParamSpec& param : spec->params) {
      SCOPED_TRACE(spec->name + " --" + param.name);
      gflags::CommandLineFlagInfo info;
      ASSERT_TRUE(gflags::GetCommandLineFlagInfo(param.name.c_str(), &info));
      EXPECT_EQ(engine::FormatModelParamValue(param.default_value), info.default_value);
      EXPECT_THAT(info.description, HasSubstr(spec->name));
      EXPECT_THAT(info.description, HasSubstr(param.help));
      EXPECT_THAT(info.filename, HasSubstr("tools/model_flags.cc"));
      if (std::find(declared.begin(), declared.end(), param.name) == declared.end()) {
        declared.push_back(param.name);
      }
    }
  }
  EXPECT_EQ(declared, ModelParamFlagNames());
  EXPECT_THAT(declared, ::testing::Contains("bottom_mlp"));
  gflags::CommandLineFlagInfo model;
  ASSERT_TRUE(gflags::GetCommandLineFlagInfo("model", &model));
  EXPECT_THAT(model.description, HasSubstr("dlrm, deepfm, wide_deep, dcn_v2, mmoe (multi-task) or moe"));
  EXPECT_EQ("dlrm", ModelFlag());
}

TEST_F(ModelFlagsTest, AModelsParametersComeFromTheirFlagsAndNoOtherModels) {
  Result<engine::ModelParams> defaults = ModelParamsFromFlags("dcn_v2");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  ASSERT_EQ(2u, defaults->values().size());
  EXPECT_EQ(3, defaults->Int("cross_layers"));
  EXPECT_EQ(0, defaults->Int("cross_rank"));

  gflags::SetCommandLineOption("cross_layers", "5");
  gflags::SetCommandLineOption("bottom_mlp", "8,4");  // dlrm's and moe's: ignored.
  Result<engine::ModelParams> set = ModelParamsFromFlags("dcn_v2");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(5, set->Int("cross_layers"));
  EXPECT_EQ(nullptr, set->Find("bottom_mlp"));

  Result<engine::ModelParams> moe = ModelParamsFromFlags("moe");
  ASSERT_TRUE(moe.ok()) << moe.status();
  EXPECT_EQ((std::vector<int>{8, 4}), moe->WidthList("bottom_mlp"));
  EXPECT_EQ(1.25, moe->Double("moe_capacity_factor"));
  EXPECT_EQ("interaction", moe->String("moe_gate_input"));
  EXPECT_EQ(std::vector<int>{}, moe->WidthList("moe_expert_mlp"));
}

TEST_F(ModelFlagsTest, AValueOfTheWrongFormOrAnUnknownModelNamesIt) {
  gflags::SetCommandLineOption("expert_mlp", "8,x");
  Result<engine::ModelParams> mmoe = ModelParamsFromFlags("mmoe");
  EXPECT_EQ(StatusCode::kInvalidArgument, mmoe.status().code());
  EXPECT_EQ("--expert_mlp=8,x: 'x' is not a positive integer", mmoe.status().message());
  // Another model does not read it.
  EXPECT_TRUE(ModelParamsFromFlags("dlrm").ok());
  EXPECT_THAT(ModelParamsFromFlags("resnet").status().message(),
              HasSubstr("--model=resnet is not known"));
}

}  // namespace
}  // namespace ember::tools
