#include "tools/flag_check.h"

#include <gflags/gflags.h>
#include <gtest/gtest.h>

#include <fstream>

#include "tests/testing/temp_dir.h"
#include "tools/help.h"

// Flags of this test binary, standing in for those of the ember command.
DEFINE_string(model, "dlrm", "Model.");
DEFINE_int32(batch_size, 256, "Examples per step.");
DEFINE_bool(shuffle, true, "Shuffle.");
DEFINE_string(train_data, "", "Files.");

namespace ember::tools {
namespace {

TEST(EditDistanceTest, CountsInsertionsDeletionsChangesAndSwaps) {
  const struct {
    const char* a;
    const char* b;
    int distance;
  } cases[] = {
      {"model", "model", 0},  {"modle", "model", 1}, {"mode", "model", 1},
      {"modelx", "model", 1}, {"madel", "model", 1}, {"batchsize", "batch_size", 1},
      {"", "abc", 3},         {"abc", "abd", 1},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(c.distance, EditDistance(c.a, c.b)) << c.a << " vs " << c.b;
    EXPECT_EQ(c.distance, EditDistance(c.b, c.a)) << c.b << " vs " << c.a;
  }
}

TEST(ClosestFlagTest, SuggestsTheFlagATypoMeantAndNothingForAStrangeName) {
  EXPECT_EQ("--model", ClosestFlag("modle"));
  EXPECT_EQ("--batch_size", ClosestFlag("batchsize"));
  EXPECT_EQ("--noshuffle", ClosestFlag("noshufle"));
  EXPECT_EQ("--train_data", ClosestFlag("trian_data"));
  EXPECT_EQ("", ClosestFlag("completely_different"));
}

class CheckFlagNamesTest : public test::TempDirTest {
 protected:
  std::string Flagfile(const std::string& name, const std::string& text) {
    std::ofstream(Path(name)) << text;
    return Path(name);
  }
};

TEST_F(CheckFlagNamesTest, AcceptsWhatGflagsReads) {
  const std::string inner = Flagfile("inner.flags", "--batch_size=64\n");
  const std::string file = Flagfile("job.flags",
                                    "# comment\n\n  --model=deepfm\n-shuffle\r\n--noshuffle\n  \n"
                                    "--train_data=a b.tsv\n--flagfile=" +
                                        inner + "\n");
  EXPECT_TRUE(CheckFlagNames({"--flagfile=" + file, "--model", "dcn_v2", "-batch_size=3",
                              "--shuffle", "positional", "--", "--not_a_flag"})
                  .ok());
  EXPECT_TRUE(CheckFlagNames({"--flagfile", file}).ok());
  EXPECT_TRUE(CheckFlagNames({"--undefok=legacy", "--legacy=1"}).ok());
}

TEST_F(CheckFlagNamesTest, RejectsUnknownNamesOnTheCommandLineWithASuggestion) {
  const Status status = CheckFlagNames({"--model=dlrm", "--modle=deepfm"});
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_EQ("unknown flag --modle; did you mean --model?", status.message());
}

TEST_F(CheckFlagNamesTest, RejectsFlagfileLinesGflagsWouldDropNamingFileAndLine) {
  const struct {
    const char* line;
    const char* message;  // After "FILE:2: ".
  } cases[] = {
      {"--modle=deepfm", "unknown flag --modle; did you mean --model?"},
      {"--train_data /path/file.tsv",
       "'--train_data /path/file.tsv' separates the value with a space, and gflags would "
       "ignore the line; write --train_data=/path/file.tsv"},
      {"--model = deepfm",
       "'--model = deepfm' separates the value with a space, and gflags would ignore the "
       "line; write --model=deepfm"},
      {"--model", "--model has no value; write --model=VALUE"},
      {"--noshuffle=1", "'--noshuffle=1' gives a value to --noshuffle; write --shuffle=1"},
      {"model=deepfm", "'model=deepfm' is not a flag; write --model=deepfm"},
      {"--shuffle ", "'--shuffle' is followed by blanks, which gflags would read as part of "
                     "the flag; remove them"},
      {"--model=deepfm\t", "'--model=deepfm' is followed by blanks, which gflags would read as "
                           "part of the flag; remove them"},
      {"deepfm",
       "'deepfm' is not a flag (a flagfile line is --name=value, a # comment or "
       "blank)"},
  };
  for (const auto& c : cases) {
    const std::string file = Flagfile("job.flags", std::string("--model=dlrm\n") + c.line + "\n");
    const Status status = CheckFlagNames({"--flagfile=" + file});
    EXPECT_EQ(StatusCode::kInvalidArgument, status.code()) << c.line;
    EXPECT_EQ(file + ":2: " + c.message, status.message()) << c.line;
  }
}

TEST_F(CheckFlagNamesTest, FollowsNestedFlagfilesAndStopsAtOneThatIncludesItself) {
  const std::string inner = Flagfile("inner.flags", "--batch_size=1\n--epochz=2\n");
  const std::string outer = Flagfile("outer.flags", "--flagfile=" + inner + "\n");
  Status status = CheckFlagNames({"--flagfile=" + outer});
  EXPECT_EQ(inner + ":2: unknown flag --epochz", status.message());

  const std::string loop = Path("loop.flags");
  Flagfile("loop.flags", "--flagfile=" + loop + "\n");
  status = CheckFlagNames({"--flagfile=" + loop});
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_NE(std::string::npos, status.message().find("nest more than")) << status;

  status = CheckFlagNames({"--flagfile=" + Path("missing.flags")});
  EXPECT_EQ(StatusCode::kNotFound, status.code());
  EXPECT_NE(std::string::npos, status.message().find(Path("missing.flags"))) << status;
}

TEST(ReadableFlagValueTest, WritesValuesAsAUserWould) {
  EXPECT_EQ("0.3", ReadableFlagValue("double", "0.29999999999999999"));
  EXPECT_EQ("0.001", ReadableFlagValue("double", "0.001"));
  EXPECT_EQ("300", ReadableFlagValue("double", "300"));
  EXPECT_EQ("\"\"", ReadableFlagValue("string", ""));
  EXPECT_EQ("\"a b\"", ReadableFlagValue("string", "a b"));
  EXPECT_EQ("512,256", ReadableFlagValue("string", "512,256"));
  EXPECT_EQ("true", ReadableFlagValue("bool", "true"));
  EXPECT_EQ("-1", ReadableFlagValue("int64", "-1"));
}

TEST(WrapTextTest, BreaksAtSpacesAndIndentsTheFollowingLines) {
  EXPECT_EQ("alpha beta gamma delta\n    epsilon",
            WrapText("alpha beta gamma delta epsilon", 4, 30));
  EXPECT_EQ("short", WrapText("short", 4, 30));
  const std::string word(30, 'w');
  EXPECT_EQ("a\n    " + word + "\n    b", WrapText("a " + word + " b", 4, 30));
}

}  // namespace
}  // namespace ember::tools
