#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ember {

// Reads a whole file. NotFound if it does not exist, IOError otherwise.
Result<std::string> ReadFile(const std::string& path);

// Writes `contents` to `path` atomically: a temporary file in the same
// directory is written, fsynced and renamed over `path`, then the directory is
// fsynced. A failure leaves any previous file at `path` untouched.
Status WriteFileAtomic(const std::string& path, const std::string& contents);

// A file written in pieces under a temporary name in the directory of `path`
// ("<path>.tmp.<pid>.<n>") and made visible at `path` only by Commit: fsync,
// rename over `path`, fsync of the directory. Destroyed without a successful
// Commit (abandoned, or after an error) it removes the temporary file, so a
// failed writer leaves any previous file at `path` untouched and no new one.
// A process killed while writing leaves the temporary file behind, never a
// partial file at `path`.
// Thread safety: one thread at a time.
class AtomicFileWriter {
 public:
  // Creates the temporary file. IOError naming it if it cannot be created
  // (missing or unwritable directory).
  static Result<std::unique_ptr<AtomicFileWriter>> Create(const std::string& path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Appends `bytes`. IOError naming the temporary file on failure.
  Status Write(std::string_view bytes);
  // Overwrites bytes [offset, offset + bytes.size()) already written (a
  // header filled in last). REQUIRES: offset + bytes.size() <= size().
  Status WriteAt(int64_t offset, std::string_view bytes);
  // Bytes appended so far.
  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }

  // Makes the contents durable and visible at `path`. IOError on failure,
  // after which the temporary file is removed when the writer is destroyed.
  // REQUIRES: called at most once.
  Status Commit();

 private:
  AtomicFileWriter(std::string path, std::string temp_path, int fd)
      : path_(std::move(path)), temp_path_(std::move(temp_path)), fd_(fd) {}

  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  int64_t size_ = 0;
  bool committed_ = false;
};

// Removes the file at `path` and fsyncs its directory, so that the removal
// survives a crash. OK if there is no file; IOError naming the path otherwise.
Status RemoveFileDurably(const std::string& path);

// Creates `path` and its parents if missing.
Status MakeDirectories(const std::string& path);

bool FileExists(const std::string& path);

// A directory created under the system's temporary directory and removed,
// with everything in it, when the object is destroyed.
// Thread safety: one thread at a time.
class TempDir {
 public:
  TempDir() = default;
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Creates the directory, named `<prefix>-XXXXXX`, and returns its path.
  // IOError naming the pattern when it cannot be created.
  // REQUIRES: called at most once.
  Result<std::string> Create(const std::string& prefix = "ember");
  // Empty until Create succeeds.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The summed sizes of the files at `paths` as stored (a .gz counts its
// compressed bytes); a file that cannot be examined counts 0. For progress
// and sizing, not for validation.
int64_t TotalFileBytes(const std::vector<std::string>& paths);

// Checks, before long work, that a file can later be written at `path`: its
// directory exists and is writable and `path` is not a directory. Returns
// InvalidArgument naming the path otherwise.
Status CheckWritableDestination(const std::string& path);

}  // namespace ember
