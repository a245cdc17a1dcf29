#include "core/dir_lock.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "core/file.h"

namespace ember {
namespace {

using ::testing::HasSubstr;

TEST(DirectoryLockTest, ASecondHolderIsRefusedNamingTheDirectoryAndTheFirst) {
  TempDir temp;
  const std::string dir = *temp.Create("dir-lock") + "/checkpoints";
  Result<std::unique_ptr<DirectoryLock>> first = DirectoryLock::Acquire(dir);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(FileExists(dir + "/" + DirectoryLock::kFileName)) << "Acquire creates the directory";

  Result<std::unique_ptr<DirectoryLock>> second = DirectoryLock::Acquire(dir);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr(dir + " is in use by another job"));
  EXPECT_THAT(second.status().message(), HasSubstr("pid " + std::to_string(::getpid()) + " host "));
}

TEST(DirectoryLockTest, ReleasedWhenTheHolderIsDestroyed) {
  TempDir temp;
  const std::string dir = *temp.Create("dir-lock");
  Result<std::unique_ptr<DirectoryLock>> first = DirectoryLock::Acquire(dir);
  ASSERT_TRUE(first.ok()) << first.status();
  first->reset();
  Result<std::unique_ptr<DirectoryLock>> again = DirectoryLock::Acquire(dir);
  EXPECT_TRUE(again.ok()) << again.status();
}

TEST(DirectoryLockTest, AKilledHolderLeavesNoStaleLock) {
  TempDir temp;
  const std::string dir = *temp.Create("dir-lock");
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The holder: takes the lock, says so, and waits to be killed.
    Result<std::unique_ptr<DirectoryLock>> lock = DirectoryLock::Acquire(dir);
    const char byte = lock.ok() ? '1' : '0';
    if (::write(ready[1], &byte, 1) != 1) ::_exit(3);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(byte, '1') << "the child could not take the lock";

  Result<std::unique_ptr<DirectoryLock>> while_held = DirectoryLock::Acquire(dir);
  ASSERT_FALSE(while_held.ok());
  EXPECT_THAT(while_held.status().message(), HasSubstr("pid " + std::to_string(child) + " host "));

  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int wait_status = 0;
  ASSERT_EQ(::waitpid(child, &wait_status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(wait_status));
  Result<std::unique_ptr<DirectoryLock>> after = DirectoryLock::Acquire(dir);
  EXPECT_TRUE(after.ok()) << after.status();
}

TEST(DirectoryLockTest, ADirectoryThatCannotBeMadeIsAnIoError) {
  TempDir temp;
  const std::string file = *temp.Create("dir-lock") + "/plain";
  ASSERT_TRUE(WriteFileAtomic(file, "x").ok());
  Result<std::unique_ptr<DirectoryLock>> lock = DirectoryLock::Acquire(file + "/below");
  ASSERT_FALSE(lock.ok());
  EXPECT_THAT(lock.status().message(), HasSubstr(file));
}

}  // namespace
}  // namespace ember
