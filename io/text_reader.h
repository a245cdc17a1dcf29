#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "io/batch.h"
#include "io/dataset.h"
#include "io/text_format.h"

namespace ember::io {

enum class BadLinePolicy { kSkip, kFail };
// Parses "skip" or "fail".
Result<BadLinePolicy> ParseBadLinePolicy(const std::string& name);

struct TextReadOptions {
  // What a malformed line does: skip it (counted and the first few logged) or
  // fail the read with the file and line.
  BadLinePolicy bad_lines = BadLinePolicy::kSkip;
  // With kSkip, the read still fails when more than this fraction of lines
  // is bad (a wrong file or format, not a few bad lines).
  double max_bad_ratio = 0.01;
  // Parser threads; <= 0 means every hardware thread.
  int threads = 0;
  // Keep only the examples whose index (0, 1, ... over the good lines of all
  // the files, in order) is keep_offset modulo keep_every: one rank's share
  // of data in memory (io/rank_shard_source.h), read without holding the
  // rest. Bad lines are counted over every line whatever is kept.
  // REQUIRES: keep_every >= 1, 0 <= keep_offset < keep_every.
  int64_t keep_every = 1;
  int64_t keep_offset = 0;
};

// A longer line is a bad line of its own ("line too long"), whatever it holds;
// so is a line with a NUL byte ("binary data"), in every format.
inline constexpr size_t kMaxLineBytes = size_t{1} << 20;
// Bad lines kept as examples in a report.
inline constexpr size_t kMaxBadLineExamples = 5;

// A bad line found by ParseLines; `line` counts from 1 at the start of the
// text that was parsed.
struct BadLine {
  int64_t line = 0;
  BadLineReason reason = BadLineReason::kColumnCount;
  std::string got;
};

// What ParseLines made of a run of lines.
struct ParsedLines {
  Batch rows;         // One example per good line, in line order.
  int64_t lines = 0;  // Lines consumed, good and bad.
  int64_t bad_lines = 0;
  std::array<int64_t, kNumBadLineReasons> by_reason{};  // Indexed by BadLineReason.
  std::vector<BadLine> examples;                        // The first kMaxBadLineExamples.
};

// Parses `text`, complete lines each ending in '\n' (the last one may lack
// it), with `parser` into `out`, which is cleared first (its capacity is
// kept, so reuse it). "\r\n" line endings are fine. Every line, an empty one
// included, is given to the parser; a line longer than kMaxLineBytes is bad
// without being parsed. The examples of bad lines are left out of out->rows.
// With `stop_at_bad_line` it returns after the first bad line (counted in
// out->lines). This is the unit of parallel work of ReadTextFiles, and of
// any reader that cuts files into pieces of lines itself.
void ParseLines(std::string_view text, const LineParser& parser, const TextLayout& layout,
                bool stop_at_bad_line, ParsedLines* out);

// Reads text files of `format` into memory, in file order then line order
// whatever the thread count: a file is read in blocks of 64 MiB, cut at
// newlines into pieces of about 1 MiB that are parsed in parallel, and the
// pieces' examples are placed in order. A path ending in ".gz" is read
// through zlib. With a header format, the first line of each file is its
// header (not counted in lines_read; bad-line numbers still count it).
// "\r\n" line endings and a last line without a newline are fine; blank lines
// at the end of a file are ignored (inside a file they go to the parser).
//
// Bad lines (reasons in text_format.h, per format in its header): with kFail
// the read fails with InvalidArgument "path:line: reason (got ...)" for the
// first one. With kSkip they are counted in Dataset::bad_lines() (the first
// five as "path:line: reason (got ...)") and logged as a warning; the read
// fails with InvalidArgument when bad_lines / lines_read > max_bad_ratio.
//
// Other failures: no paths (InvalidArgument), a missing file (NotFound), a
// directory (InvalidArgument), a read failure (IOError), a truncated or
// corrupt gzip file (DataLoss), a header the format rejects or a header line
// longer than a block (InvalidArgument), each naming the file.
// Memory: the dataset, one 64 MiB read block and the parsed examples of one
// block.
Result<Dataset> ReadTextFiles(const std::vector<std::string>& paths, const TextFormat& format,
                              const TextReadOptions& options);

}  // namespace ember::io
