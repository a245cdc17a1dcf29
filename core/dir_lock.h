#pragma once

// One writer per directory: an exclusive lock that a job holds on each
// directory it writes (its checkpoints, its disk tier), as RocksDB and
// leveldb hold a LOCK file on a database.
//
// The lock is flock(2) on <dir>/ember.lock, taken without waiting. The
// kernel releases it when the holder's descriptor closes, and so when the
// process dies however it dies (SIGKILL included): a killed job never leaves
// a stale lock, and the file itself may stay. After taking the lock the
// holder writes who it is ("pid 1234 host h1 since 2026-12-01T22:53:56Z"),
// which a refused job quotes.
//
// flock locks are per open file description: a second DirectoryLock on the
// same directory is refused in the same process too. On NFS, Linux maps
// flock to byte-range locks on the server, which hold across hosts; on file
// systems without locks the acquire fails naming the directory.
//
// Thread safety: a DirectoryLock is not shared; Acquire may be called from
// any thread.

#include <memory>
#include <string>

#include "core/status.h"

namespace ember {

class DirectoryLock {
 public:
  // The name of the lock file in a locked directory.
  static constexpr const char* kFileName = "ember.lock";

  // Creates `dir` if missing and locks it. FailedPrecondition when another
  // holder has it ("<dir> is in use by another job (pid P host H since T)");
  // IOError naming the directory when it cannot be created or locked.
  static Result<std::unique_ptr<DirectoryLock>> Acquire(const std::string& dir);

  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

  const std::string& dir() const { return dir_; }

 private:
  DirectoryLock(std::string dir, int fd) : dir_(std::move(dir)), fd_(fd) {}

  std::string dir_;
  int fd_ = -1;
};

}  // namespace ember
