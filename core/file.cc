#include "core/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <glog/logging.h>

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
  EMBER_ASSIGN_OR_RETURN(auto file, AtomicFileWriter::Create(path));
  EMBER_RETURN_IF_ERROR(file->Write(contents));
  return file->Commit();
}

Status RemoveFileDurably(const std::string& path) {
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) return Status::OK();
    return Status::IOError(path, ": cannot remove: ", ErrnoText());
  }
  return FsyncDirectoryOf(path);
}

Result<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::Create(const std::string& path) {
  // The counter keeps two writers of one process (to the same path, too)
  // apart; the pid keeps processes apart.
  static std::atomic<int64_t> next_id{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                          std::to_string(next_id.fetch_add(1, std::memory_order_relaxed));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IOError(tmp, ": cannot create: ", ErrnoText());
  return std::unique_ptr<AtomicFileWriter>(new AtomicFileWriter(path, tmp, fd));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_path_.c_str());
}

Status AtomicFileWriter::Write(std::string_view bytes) {
  if (fd_ < 0) return Status::IOError(temp_path_, ": write after close");
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::IOError(temp_path_, ": write failed: ", ErrnoText());
    }
    bytes.remove_prefix(static_cast<size_t>(n));
    size_ += n;
  }
  return Status::OK();
}

Status AtomicFileWriter::WriteAt(int64_t offset, std::string_view bytes) {
  CHECK(offset >= 0 && offset + static_cast<int64_t>(bytes.size()) <= size_)
      << "WriteAt must overwrite bytes already written";
  if (fd_ < 0) return Status::IOError(temp_path_, ": write after close");
  while (!bytes.empty()) {
    const ssize_t n = ::pwrite(fd_, bytes.data(), bytes.size(), offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::IOError(temp_path_, ": write failed: ", ErrnoText());
    }
    bytes.remove_prefix(static_cast<size_t>(n));
    offset += n;
  }
  return Status::OK();
}

Status AtomicFileWriter::Commit() {
  CHECK(!committed_ && fd_ >= 0) << "Commit is called once, on an open writer";
  if (::fsync(fd_) != 0) return Status::IOError(temp_path_, ": fsync failed: ", ErrnoText());
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) return Status::IOError(temp_path_, ": close failed: ", ErrnoText());
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    return Status::IOError(path_, ": rename from ", temp_path_, " failed: ", ErrnoText());
  }
  committed_ = true;
  return FsyncDirectoryOf(path_);
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

int64_t TotalFileBytes(const std::vector<std::string>& paths) {
  int64_t total = 0;
  for (const std::string& path : paths) {
    std::error_code error;
    const uintmax_t bytes = std::filesystem::file_size(path, error);
    if (!error) total += static_cast<int64_t>(bytes);
  }
  return total;
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

Result<std::string> TempDir::Create(const std::string& prefix) {
  std::string pattern =
      (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    return Status::IOError("cannot create a temporary directory from ", pattern, ": ",
                           std::strerror(errno));
  }
  path_ = pattern;
  return path_;
}

}  // namespace ember
