#pragma once

// Small parsing helpers shared by the text formats (criteo.cc,
// delimited_format.cc, libsvm_format.cc, slot_format.cc). Hot-loop helpers
// are inline.

#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "io/batch.h"

namespace ember::io::internal {

// The UTF-8 byte order mark that spreadsheet software and some exporters put
// at the start of a text file: not part of its first line, header or not.
inline constexpr std::string_view kUtf8ByteOrderMark = "\xEF\xBB\xBF";

// Longest excerpt of a field quoted in a bad-line message.
inline constexpr size_t kMaxQuotedBytes = 32;

// `field` in double quotes, cut to kMaxQuotedBytes followed by "..." if
// longer, with control bytes (a NUL, an escape) written as \xNN.
std::string Quote(std::string_view field);

// Splits `line` at every `delimiter` byte, keeping empty fields. Stores the
// first `max_fields` fields in `fields` and returns the number of fields,
// which may be larger (the caller reports a column count).
inline int SplitFields(std::string_view line, char delimiter, std::string_view* fields,
                       int max_fields) {
  int count = 0;
  // Fields of click logs are short (8 bytes or less for Criteo): a byte loop
  // beats a memchr per field.
  size_t start = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] != delimiter) continue;
    if (count < max_fields) fields[count] = line.substr(start, i - start);
    ++count;
    start = i + 1;
  }
  if (count < max_fields) fields[count] = line.substr(start);
  return count + 1;
}

inline bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// Cuts the next token (a run of bytes other than space and tab) off the front
// of `*rest`. Returns false when only blanks are left.
inline bool NextToken(std::string_view* rest, std::string_view* token) {
  size_t begin = 0;
  while (begin < rest->size() && IsBlank((*rest)[begin])) ++begin;
  if (begin == rest->size()) {
    rest->remove_prefix(begin);
    return false;
  }
  size_t end = begin + 1;
  while (end < rest->size() && !IsBlank((*rest)[end])) ++end;
  *token = rest->substr(begin, end - begin);
  rest->remove_prefix(end);
  return true;
}

// The whole of `text` as a decimal integer with an optional '-'.
inline bool ParseInt64(std::string_view text, int64_t* value) {
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, *value);
  return error == std::errc() && ptr == end;
}

// The whole of `text` as unsigned decimal digits (no sign).
inline bool ParseUint64(std::string_view text, uint64_t* value) {
  if (text.empty() || text[0] < '0' || text[0] > '9') return false;
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, *value);
  return error == std::errc() && ptr == end;
}

// The whole of `text` as a finite decimal number ("3", "-0.5", "+2", "1e-3").
// "nan", "inf", hexadecimal, blanks and the empty string are rejected.
bool ParseFiniteDouble(std::string_view text, double* value);

// A label given as a number in [0, 1] ("0", "1", "0.25", "1.0").
bool ParseUnitLabel(std::string_view text, float* label);

// `digits` without leading zeros ("007" -> "7", "0" -> "0"), so that the
// same integer written two ways hashes to the same key.
// REQUIRES: digits is non-empty and all decimal digits.
inline std::string_view CanonicalDigits(std::string_view digits) {
  size_t zeros = 0;
  while (zeros + 1 < digits.size() && digits[zeros] == '0') ++zeros;
  return digits.substr(zeros);
}

// Counts below this have their LogTransform looked up, not computed: most
// counts in click logs are small.
inline constexpr int64_t kSmallCounts = 4096;
const std::array<float, kSmallCounts>& BuildSmallCountLogs();

// LogTransform(x) (feature_hash.h) for an integer x.
float LogTransformLarge(int64_t x);
inline float LogTransformCount(int64_t x) {
  static const std::array<float, kSmallCounts>& logs = BuildSmallCountLogs();
  return x >= 0 && x < kSmallCounts ? logs[x] : LogTransformLarge(x);
}

// A categorical feature of a line before it is put into its slot's bag.
struct SlotKey {
  int slot = 0;
  Key key = 0;
};

// Appends `num_slots` bags to `out` (their keys, and one offset per slot):
// bag s holds the keys of the features of slot s in their order in
// `features`. Reorders `features`. REQUIRES: every slot in [0, num_slots).
void AppendBags(std::vector<SlotKey>* features, int num_slots, Batch* out);

// A label written as 1 (positive) or 0 or -1 (negative): "1", "+1", "0",
// "-1", "1.0", ... (libSVM conventions).
bool ParseSignedLabel(std::string_view text, float* label);

}  // namespace ember::io::internal
