#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace ember::io::internal {

// A whole file mapped read-only (mmap PROT_READ, MAP_PRIVATE); unmapped when
// destroyed. The bytes are those of the file when it was mapped as long as
// nobody shrinks it: a file truncated by another process while mapped makes
// reads past its new end fault (SIGBUS), which no reader of a mapping can
// prevent.
// Thread safety: const methods may be called concurrently.
class MappedFile {
 public:
  enum class Access { kSequential, kRandom };

  // Maps `path`. NotFound if it does not exist, InvalidArgument if it is a
  // directory, IOError if it cannot be opened or mapped. An empty file maps
  // to size() 0 and data() nullptr. `access` is passed on as madvise
  // MADV_SEQUENTIAL (read-ahead, pages dropped behind) or MADV_RANDOM.
  static Result<std::unique_ptr<MappedFile>> Open(const std::string& path, Access access);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  int64_t size() const { return size_; }

 private:
  MappedFile(const unsigned char* data, int64_t size) : data_(data), size_(size) {}

  const unsigned char* data_ = nullptr;
  int64_t size_ = 0;
};

}  // namespace ember::io::internal
