#include <gtest/gtest.h>

#include "tools/commands.h"

namespace ember::tools {
namespace {

TEST(ParseByteSizeTest, AcceptsUnitsAsUsersWriteThem) {
  const std::vector<std::pair<std::string, int64_t>> cases = {
      {"4096", 4096},           {"512B", 512},
      {"32MB", 32LL << 20},     {"32mb", 32LL << 20},
      {"8GB", 8LL << 30},       {"8G", 8LL << 30},
      {"1.5GiB", 3LL << 29},    {"64KiB", 64LL << 10},
      {"2TB", 2LL << 40},
  };
  for (const auto& [text, bytes] : cases) {
    Result<int64_t> parsed = ParseByteSize("embedding_memory_budget", text);
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status();
    EXPECT_EQ(bytes, *parsed) << text;
  }
}

TEST(ParseByteSizeTest, RejectsWhatIsNotASizeNamingTheFlag) {
  for (const std::string text : {"", "MB", "-1GB", "12XB", "1e30", "8 GB"}) {
    Result<int64_t> parsed = ParseByteSize("embedding_memory_budget", text);
    EXPECT_EQ(StatusCode::kInvalidArgument, parsed.status().code()) << text;
    EXPECT_NE(std::string::npos, parsed.status().message().find("--embedding_memory_budget"));
  }
}

TEST(ParseWidthsTest, ParsesListsAndRejectsNonPositiveWidths) {
  EXPECT_EQ((std::vector<int>{512, 256, 64}), *ParseWidths("bottom_mlp", "512,256,64"));
  EXPECT_EQ(StatusCode::kInvalidArgument, ParseWidths("top_mlp", "64,0").status().code());
  EXPECT_EQ(StatusCode::kInvalidArgument, ParseWidths("top_mlp", "64,x").status().code());
}

}  // namespace
}  // namespace ember::tools
