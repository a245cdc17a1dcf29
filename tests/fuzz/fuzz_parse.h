#pragma once

// What the text-parser fuzz targets share: run ParseLines over the input with
// a format's parser and check what it produced, aborting (a crash for
// libFuzzer) when an invariant breaks.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "io/text_format.h"
#include "io/text_reader.h"

namespace ember::fuzz {

inline void Require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
  std::abort();
}

// Checks a parse: the rows have the layout's shape and well-formed CSR, and
// every line is counted as good or bad.
inline void CheckParsed(const io::ParsedLines& out, const io::TextLayout& layout) {
  const io::Batch& rows = out.rows;
  Require(rows.num_labels == layout.num_labels && rows.num_dense == layout.num_dense &&
              rows.num_slots == layout.num_slots,
          "rows have the layout's shape");
  Require(rows.labels.size() == static_cast<size_t>(rows.size * layout.num_labels),
          "one set of labels per row");
  Require(rows.dense.size() == static_cast<size_t>(rows.size * layout.num_dense),
          "one set of dense values per row");
  Require(rows.offsets.size() == static_cast<size_t>(rows.size * layout.num_slots + 1),
          "one offset per bag");
  Require(rows.offsets.front() == 0, "offsets start at 0");
  for (size_t i = 1; i < rows.offsets.size(); ++i) {
    Require(rows.offsets[i - 1] <= rows.offsets[i], "offsets never decrease");
  }
  Require(rows.offsets.back() == static_cast<int64_t>(rows.keys.size()),
          "the last offset is the number of keys");
  Require(rows.size + out.bad_lines <= out.lines, "each line is an example or bad");
  int64_t by_reason = 0;
  for (const int64_t count : out.by_reason) by_reason += count;
  Require(by_reason == out.bad_lines, "bad lines are counted by reason");
  for (const float label : rows.labels) Require(label == label, "labels are numbers");
  for (const float value : rows.dense) Require(value == value, "dense values are numbers");
}

// Parses `text` with a parser of `format` made for `header` (nothing to do
// if the format rejects the header), to the end and stopping at the first
// bad line, and checks both.
inline void ParseAndCheck(const io::TextFormat& format, std::string_view header,
                          std::string_view text) {
  Result<std::unique_ptr<io::LineParser>> parser = format.NewLineParser(header);
  if (!parser.ok()) return;
  const io::TextLayout layout = format.layout();
  io::ParsedLines out;
  io::ParseLines(text, **parser, layout, /*stop_at_bad_line=*/false, &out);
  CheckParsed(out, layout);
  const int64_t all_lines = out.lines;
  io::ParseLines(text, **parser, layout, /*stop_at_bad_line=*/true, &out);
  CheckParsed(out, layout);
  Require(out.lines <= all_lines, "stopping early reads no more lines");
}

// The body of a target that fuzzes N configurations of one format: byte 0
// of the input picks formats[data[0] % N]; the rest is parsed and checked
// with ParseAndCheck (no header).
template <size_t N>
void ParseWithFormatPickedByFirstByte(const std::unique_ptr<io::TextFormat> (&formats)[N],
                                      const uint8_t* data, size_t size) {
  if (size == 0) return;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  ParseAndCheck(*formats[data[0] % N], "", text);
}

// Cuts the first line (without its '\n') off `*text`.
inline std::string_view TakeLine(std::string_view* text) {
  const size_t newline = text->find('\n');
  const std::string_view line = text->substr(0, newline);
  text->remove_prefix(newline == std::string_view::npos ? text->size() : newline + 1);
  return line;
}

}  // namespace ember::fuzz
