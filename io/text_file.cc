#include "io/text_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include <zlib.h>

namespace ember::io {
namespace {

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

class PlainFile final : public TextFile {
 public:
  PlainFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PlainFile() override { ::close(fd_); }
  PlainFile(const PlainFile&) = delete;
  PlainFile& operator=(const PlainFile&) = delete;

  Result<size_t> Read(char* out, size_t max_bytes) override {
    while (true) {
      const ssize_t n = ::read(fd_, out, max_bytes);
      if (n >= 0) return static_cast<size_t>(n);
      if (errno == EINTR) continue;
      return Status::IOError(path_, ": read failed: ", std::strerror(errno));
    }
  }
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  int fd_;
};

class GzipFile final : public TextFile {
 public:
  GzipFile(std::string path, gzFile file) : path_(std::move(path)), file_(file) {}
  ~GzipFile() override { gzclose(file_); }
  GzipFile(const GzipFile&) = delete;
  GzipFile& operator=(const GzipFile&) = delete;

  Result<size_t> Read(char* out, size_t max_bytes) override {
    const unsigned request = static_cast<unsigned>(std::min<size_t>(max_bytes, INT_MAX));
    const int n = gzread(file_, out, request);
    int code = Z_OK;
    const char* message = gzerror(file_, &code);
    // zlib reports a stream that ends early as Z_BUF_ERROR ("unexpected end
    // of file"), possibly after returning the bytes it could decode.
    if (n < 0 || (code != Z_OK && code != Z_STREAM_END)) {
      if (code == Z_ERRNO) {
        return Status::IOError(path_, ": read failed: ", std::strerror(errno));
      }
      return Status::DataLoss(path_, ": truncated or corrupt gzip data: ", message);
    }
    return static_cast<size_t>(n);
  }
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  gzFile file_;
};

}  // namespace

Result<std::unique_ptr<TextFile>> OpenTextFile(const std::string& path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return Status::NotFound(path, ": no such file");
    return Status::IOError(path, ": cannot stat: ", std::strerror(errno));
  }
  if (S_ISDIR(info.st_mode)) {
    return Status::InvalidArgument(path, ": is a directory, expected a file");
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError(path, ": cannot open: ", std::strerror(errno));
  if (!EndsWith(path, ".gz")) return std::make_unique<PlainFile>(path, fd);
  gzFile file = gzdopen(fd, "rb");
  if (file == nullptr) {
    ::close(fd);
    return Status::IOError(path, ": cannot open as gzip");
  }
  gzbuffer(file, 1 << 18);
  return std::make_unique<GzipFile>(path, file);
}

}  // namespace ember::io
