#include "core/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace ember {
namespace {

std::string ErrnoText() { return std::strerror(errno); }

Status FsyncDirectoryOf(const std::string& path) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return Status::IOError(dir, ": cannot open directory: ", ErrnoText());
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return Status::IOError(dir, ": fsync failed: ", ErrnoText());
  return Status::OK();
}

}  // namespace

Result<std::string> ReadFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Status::NotFound(path, ": no such file");
  if (std::filesystem::is_directory(path, ec)) {
    return Status::InvalidArgument(path, ": is a directory, expected a file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError(path, ": cannot open: ", ErrnoText());
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return Status::IOError(path, ": read failed");
  return contents.str();
}

Status WriteFileAtomic(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IOError(tmp, ": cannot create: ", ErrnoText());
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + written, contents.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      const Status error = Status::IOError(tmp, ": write failed: ", ErrnoText());
      ::close(fd);
      ::unlink(tmp.c_str());
      return error;
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const Status error = Status::IOError(tmp, ": fsync failed: ", ErrnoText());
    ::close(fd);
    ::unlink(tmp.c_str());
    return error;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const Status error = Status::IOError(path, ": rename from ", tmp, " failed: ", ErrnoText());
    ::unlink(tmp.c_str());
    return error;
  }
  return FsyncDirectoryOf(path);
}

Status MakeDirectories(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return Status::IOError(path, ": cannot create directory: ", ec.message());
  return Status::OK();
}

Status CheckWritableDestination(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return Status::InvalidArgument(path, ": is a directory, expected a file path");
  }
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  if (!std::filesystem::is_directory(dir, ec)) {
    return Status::InvalidArgument(path, ": directory ", dir, " does not exist");
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    return Status::InvalidArgument(path, ": directory ", dir, " is not writable");
  }
  return Status::OK();
}

bool FileExists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

}  // namespace ember
