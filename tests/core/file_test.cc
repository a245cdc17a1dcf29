#include "core/file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

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

TEST_F(FileTest, AtomicFileWriterShowsNothingUntilCommit) {
  Result<std::unique_ptr<AtomicFileWriter>> file = AtomicFileWriter::Create(Path("a.bin"));
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE((*file)->Write("xxxx-body").ok());
  ASSERT_TRUE((*file)->WriteAt(0, "head").ok());
  EXPECT_EQ(9, (*file)->size());
  EXPECT_FALSE(FileExists(Path("a.bin")));
  ASSERT_TRUE((*file)->Commit().ok());
  EXPECT_EQ("head-body", *ReadFile(Path("a.bin")));
  EXPECT_FALSE(FileExists((*file)->temp_path()));
}

TEST_F(FileTest, AbandonedAtomicFileWriterKeepsThePreviousFileAndLeavesNoTemporary) {
  ASSERT_TRUE(WriteFileAtomic(Path("a.bin"), "old").ok());
  {
    Result<std::unique_ptr<AtomicFileWriter>> first = AtomicFileWriter::Create(Path("a.bin"));
    Result<std::unique_ptr<AtomicFileWriter>> second = AtomicFileWriter::Create(Path("a.bin"));
    ASSERT_TRUE(first.ok() && second.ok());
    EXPECT_NE((*first)->temp_path(), (*second)->temp_path());
    ASSERT_TRUE((*first)->Write("new").ok());
  }
  EXPECT_EQ("old", *ReadFile(Path("a.bin")));
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(1, files);
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

TEST(TempDirTest, CreatesAPrivateDirectoryAndRemovesItWithItsContents) {
  std::string path;
  {
    TempDir dir;
    EXPECT_TRUE(dir.path().empty());
    auto created = dir.Create("ember-file-test");
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    path = *created;
    EXPECT_EQ(dir.path(), path);
    EXPECT_NE(path.find("ember-file-test-"), std::string::npos);
    ASSERT_TRUE(std::filesystem::is_directory(path));
    ASSERT_TRUE(MakeDirectories(path + "/a/b").ok());
    ASSERT_TRUE(WriteFileAtomic(path + "/a/b/f", "x").ok());
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace ember
