#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "core/status.h"

namespace ember::io {

// A file read front to back as bytes; a path ending in ".gz" is decompressed
// through zlib (concatenated gzip members included).
// Thread safety: none; one reader per thread.
class TextFile {
 public:
  virtual ~TextFile() = default;
  // Reads up to `max_bytes` into `out`; returns the count, 0 at the end of
  // the file. IOError on a read failure, DataLoss on a truncated or corrupt
  // gzip stream; the message names the file.
  virtual Result<size_t> Read(char* out, size_t max_bytes) = 0;
  virtual const std::string& path() const = 0;
};

// Opens `path` for reading. NotFound if it does not exist, InvalidArgument if
// it is a directory, IOError if it cannot be opened.
Result<std::unique_ptr<TextFile>> OpenTextFile(const std::string& path);

}  // namespace ember::io
