#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/dataset.h"

namespace ember::io {

inline constexpr int kCriteoDense = 13;
inline constexpr int kCriteoSlots = 26;
inline constexpr int kCriteoColumns = 1 + kCriteoDense + kCriteoSlots;

enum class BadLinePolicy { kSkip, kFail };
// Parses "skip" or "fail".
Result<BadLinePolicy> ParseBadLinePolicy(const std::string& name);

struct CriteoReadOptions {
  int slot_bits = kDefaultSlotBitsForReader;
  // What a malformed line does: skip it (counted and the first few logged) or
  // fail the read with the file and line.
  BadLinePolicy bad_lines = BadLinePolicy::kSkip;
  // With kSkip, the read still fails when more than this fraction of lines
  // is bad (a wrong file, not a few bad lines).
  double max_bad_ratio = 0.01;
  // Parser threads; <= 0 means every hardware thread.
  int threads = 0;
};

// Reads Criteo TSV files (label, 13 integer, 26 hex categorical columns, tab
// separated; an empty field is missing) into memory, in file order then line
// order whatever the thread count. A `.gz` path is read through zlib.
//
// Each example has label 0 or 1, dense[j] = LogTransform(I(j+1)) (missing is
// 0; integers may be negative) and one key per slot s = HashCategorical(s,
// C(s+1), slot_bits), missing values hashed as "". Any non-empty categorical
// string is accepted. "\r\n" line endings and a last line without a newline
// are fine; blank lines at the end of a file are ignored.
//
// Bad lines, by reason: "column count" (not 40 fields, blank lines inside a
// file included), "bad label" (not exactly "0" or "1"), "unparsable
// integer", "line too long" (over 1 MiB). With kFail the read fails with
// InvalidArgument "path:line: reason (got ...)" for the first bad line. With
// kSkip they are counted in Dataset::bad_lines() (examples "path:line: reason
// (got ...)") and logged as a warning; the read fails with InvalidArgument
// when bad_lines / lines_read > max_bad_ratio.
//
// Other failures: no paths (InvalidArgument), a missing file (NotFound), a
// directory (InvalidArgument), a read failure (IOError) or a truncated or
// corrupt gzip file (DataLoss), each naming the file; slot_bits outside
// [5, 32] (InvalidArgument). Memory: the dataset plus one 64 MiB read block.
Result<Dataset> ReadCriteoFiles(const std::vector<std::string>& paths,
                                const CriteoReadOptions& options);

}  // namespace ember::io
