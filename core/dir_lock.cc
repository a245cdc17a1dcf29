#include "core/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <string>

#include "core/file.h"

namespace ember {
namespace {

// "pid 1234 host h1 since 2026-12-01T22:53:56Z": who holds a lock.
std::string HolderText() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "?");
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char since[32] = {};
  std::strftime(since, sizeof(since), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return "pid " + std::to_string(::getpid()) + " host " + host + " since " + since;
}

// What the holder of the lock at `fd` wrote: one line, or "unknown" while
// it has not written it yet.
std::string ReadHolder(int fd) {
  char text[512] = {};
  const ssize_t n = ::pread(fd, text, sizeof(text) - 1, 0);
  std::string holder = n > 0 ? std::string(text, static_cast<size_t>(n)) : std::string();
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
  return holder.empty() ? "unknown" : holder;
}

}  // namespace

Result<std::unique_ptr<DirectoryLock>> DirectoryLock::Acquire(const std::string& dir) {
  EMBER_RETURN_IF_ERROR(MakeDirectories(dir));
  const std::string path = dir + "/" + kFileName;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::IOError(path, ": cannot open the directory's lock file: ",
                           std::strerror(errno));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    if (error == EWOULDBLOCK) {
      const std::string holder = ReadHolder(fd);
      ::close(fd);
      return Status::FailedPrecondition(dir, " is in use by another job (", holder,
                                        "; lock file ", path,
                                        "): wait for that job to end or stop it, or choose "
                                        "another directory");
    }
    ::close(fd);
    return Status::IOError(path, ": cannot lock the directory: ", std::strerror(error));
  }
  const std::string holder = HolderText() + "\n";
  if (::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, holder.data(), holder.size(), 0) != static_cast<ssize_t>(holder.size())) {
    const int error = errno;
    ::close(fd);
    return Status::IOError(path, ": cannot write the lock's holder: ", std::strerror(error));
  }
  return std::unique_ptr<DirectoryLock>(new DirectoryLock(dir, fd));
}

DirectoryLock::~DirectoryLock() {
  // Closing the descriptor releases the lock; the file stays (removing it
  // would race with a job that has just opened it to lock it).
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace ember
