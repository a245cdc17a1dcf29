#include "io/internal/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ember::io::internal {

Result<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path, Access access) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound(path, ": no such file");
    return Status::IOError(path, ": cannot open: ", std::strerror(errno));
  }
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    const Status error = Status::IOError(path, ": cannot stat: ", std::strerror(errno));
    ::close(fd);
    return error;
  }
  if (S_ISDIR(info.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(path, ": is a directory, expected a file");
  }
  const int64_t size = info.st_size;
  if (size == 0) {
    ::close(fd);
    return std::unique_ptr<MappedFile>(new MappedFile(nullptr, 0));
  }
  void* data = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
  const int mmap_errno = errno;
  // The mapping keeps the file referenced; the descriptor is not needed.
  ::close(fd);
  if (data == MAP_FAILED) {
    return Status::IOError(path, ": cannot map ", size, " bytes: ", std::strerror(mmap_errno));
  }
  // Advice only: a kernel that ignores it reads the same bytes.
  ::madvise(data, static_cast<size_t>(size),
            access == Access::kSequential ? MADV_SEQUENTIAL : MADV_RANDOM);
  return std::unique_ptr<MappedFile>(new MappedFile(static_cast<const unsigned char*>(data), size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), static_cast<size_t>(size_));
}

}  // namespace ember::io::internal
