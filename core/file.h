#pragma once

#include <string>

#include "core/status.h"

namespace ember {

// Reads a whole file. NotFound if it does not exist, IOError otherwise.
Result<std::string> ReadFile(const std::string& path);

// Writes `contents` to `path` atomically: a temporary file in the same
// directory is written, fsynced and renamed over `path`, then the directory is
// fsynced. A failure leaves any previous file at `path` untouched.
Status WriteFileAtomic(const std::string& path, const std::string& contents);

// Creates `path` and its parents if missing.
Status MakeDirectories(const std::string& path);

bool FileExists(const std::string& path);

// Checks, before long work, that a file can later be written at `path`: its
// directory exists and is writable and `path` is not a directory. Returns
// InvalidArgument naming the path otherwise.
Status CheckWritableDestination(const std::string& path);

}  // namespace ember
