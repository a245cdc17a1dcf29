#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "tests/testing/temp_dir.h"
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

class ExpandPathListTest : public test::TempDirTest {};

TEST_F(ExpandPathListTest, ExpandsPatternsInOrderAndKeepsPlainPaths) {
  for (const char* name : {"day_2.tsv", "day_1.tsv", "day_10.tsv", "other.csv"}) {
    std::ofstream(Path(name)) << "x";
  }
  Result<std::vector<std::string>> paths =
      ExpandPathList("train_data", Path("other.csv") + "," + Path("day_?.tsv") + ",," +
                                       Path("not_there.tsv"));
  ASSERT_TRUE(paths.ok()) << paths.status();
  EXPECT_EQ((std::vector<std::string>{Path("other.csv"), Path("day_1.tsv"), Path("day_2.tsv"),
                                      Path("not_there.tsv")}),
            *paths);
  EXPECT_EQ(3u, ExpandPathList("input", Path("day_*")).value().size());
  EXPECT_TRUE(ExpandPathList("input", "").value().empty());
}

TEST_F(ExpandPathListTest, APatternMatchingNothingIsNotFoundNamingFlagAndPattern) {
  Result<std::vector<std::string>> paths = ExpandPathList("input", Path("*.gz"));
  EXPECT_EQ(StatusCode::kNotFound, paths.status().code());
  EXPECT_NE(std::string::npos, paths.status().message().find("--input"));
  EXPECT_NE(std::string::npos, paths.status().message().find("*.gz"));
}

}  // namespace
}  // namespace ember::tools
