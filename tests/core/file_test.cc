#include "core/file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "core/json.h"
#include "tests/testing/temp_dir.h"

namespace ember {
namespace {

using FileTest = test::TempDirTest;

TEST_F(FileTest, WriteFileAtomicReplacesContentsAndLeavesNoTemporaries) {
  ASSERT_TRUE(WriteFileAtomic(Path("a.json"), "first").ok());
  ASSERT_TRUE(WriteFileAtomic(Path("a.json"), "second").ok());
  EXPECT_EQ("second", *ReadFile(Path("a.json")));
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(1, files);
}

TEST_F(FileTest, FailedWriteKeepsThePreviousFile) {
  ASSERT_TRUE(WriteFileAtomic(Path("keep.json"), "old").ok());
  // A directory where the rename target should be makes the rename fail.
  std::filesystem::create_directories(Path("blocked"));
  std::filesystem::create_directories(Path("blocked/inner"));
  Status status = WriteFileAtomic(Path("blocked"), "new");
  EXPECT_FALSE(status.ok());
  EXPECT_EQ("old", *ReadFile(Path("keep.json")));
}

TEST_F(FileTest, WriteIntoMissingDirectoryIsIOErrorNamingThePath) {
  Status status = WriteFileAtomic(Path("no/such/dir/x"), "x");
  EXPECT_EQ(StatusCode::kIOError, status.code());
  EXPECT_NE(std::string::npos, status.message().find("no/such/dir/x"));
}

TEST_F(FileTest, WritableDestinationNeedsAnExistingDirectory) {
  EXPECT_TRUE(CheckWritableDestination(Path("out.json")).ok());
  EXPECT_EQ(StatusCode::kInvalidArgument, CheckWritableDestination(Path("no/out.json")).code());
  EXPECT_EQ(StatusCode::kInvalidArgument, CheckWritableDestination(dir_.string()).code());
}

TEST_F(FileTest, ReadMissingFileIsNotFound) {
  Result<std::string> contents = ReadFile(Path("missing.tsv"));
  EXPECT_EQ(StatusCode::kNotFound, contents.status().code());
  EXPECT_NE(std::string::npos, contents.status().message().find("missing.tsv"));
}

TEST_F(FileTest, ReadDirectoryIsInvalidArgument) {
  EXPECT_EQ(StatusCode::kInvalidArgument, ReadFile(dir_.string()).status().code());
}

TEST(JsonTest, ObjectsNestAndEscape) {
  JsonObject inner;
  inner.Add("auc", 0.75).Add("examples", int64_t{1600});
  JsonObject outer;
  outer.Add("test", inner).Add("name", "a\"b\n").Add("ok", true);
  EXPECT_EQ("{\"test\":{\"auc\":0.75,\"examples\":1600},\"name\":\"a\\\"b\\n\",\"ok\":true}\n",
            outer.ToString(-1));
}

TEST(JsonTest, NonFiniteNumbersBecomeNull) {
  JsonObject o;
  o.Add("x", std::numeric_limits<double>::infinity());
  EXPECT_EQ("{\"x\":null}\n", o.ToString(-1));
}

}  // namespace
}  // namespace ember
