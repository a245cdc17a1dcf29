#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/dataset.h"
#include "io/text_format.h"
#include "io/text_reader.h"

namespace ember::io {

inline constexpr int kCriteoDense = 13;
inline constexpr int kCriteoSlots = 26;
inline constexpr int kCriteoColumns = 1 + kCriteoDense + kCriteoSlots;

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

// The Criteo TSV format: label, 13 integer and 26 categorical columns, tab
// separated; an empty field is missing. No header.
//
// Each example has label 0 or 1, dense[j] = LogTransform(I(j+1)) (missing is
// 0; integers may be negative) and one key per slot s = HashCategorical(s,
// C(s+1), slot_bits), missing values hashed as "". Any non-empty categorical
// string is accepted. "\r\n" line endings and a last line without a newline
// are fine; blank lines at the end of a file are ignored.
//
// Bad lines, by reason: "column count" (not 40 fields, blank lines inside a
// file included), "bad label" (not exactly "0" or "1"), "unparsable
// integer", "line too long" (over 1 MiB).
//
// InvalidArgument if slot_bits is outside [5, 32] (26 slots need 5 bits).
Result<std::unique_ptr<TextFormat>> NewCriteoFormat(int slot_bits = kDefaultSlotBitsForReader);

// Reads Criteo TSV files into memory with ReadTextFiles (text_reader.h; file
// then line order whatever the thread count, ".gz" read through zlib, the
// bad-line policy and the other failures described there).
// InvalidArgument if there are no paths or slot_bits is outside [5, 32].
Result<Dataset> ReadCriteoFiles(const std::vector<std::string>& paths,
                                const CriteoReadOptions& options);

}  // namespace ember::io
