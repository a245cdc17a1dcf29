#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "io/batch.h"

namespace ember::io {

// Why a line of text was rejected. All text formats share these reasons, so
// that a bad-line report reads the same whatever the format; each format's
// header says which it uses and when.
enum class BadLineReason : int {
  kColumnCount,        // Wrong number of fields (a blank line inside a file too).
  kBadLabel,           // Missing label, or one the format does not accept.
  kUnparsableInteger,  // An integer field is not an integer (Criteo).
  kUnparsableNumber,   // A numeric field is not a finite number.
  kBadFeature,         // A malformed feature: "idx:val", "slot:feasign", ...
  kUnknownSlot,        // A feature names a slot or field the format does not have.
  kLineTooLong,        // Over kMaxLineBytes (text_reader.h), whatever it holds.
  kBinaryData,         // A NUL byte: not text (a file's zero-filled tail after a crash).
};
inline constexpr int kNumBadLineReasons = 8;

// The name used in reports and messages: "column count", "bad label",
// "unparsable integer", "unparsable number", "bad feature", "unknown slot",
// "line too long", "binary data".
const char* BadLineReasonName(BadLineReason reason);

// What a format says about a line it rejects.
struct LineError {
  BadLineReason reason = BadLineReason::kColumnCount;
  // A short excerpt of what was found, quoted in messages as "(got ...)":
  // "39 columns", "\"2\"", "I3=\"12a\"".
  std::string got;
};

// The shape of the examples a format produces.
struct TextLayout {
  int num_labels = 1;
  int num_dense = 0;
  int num_slots = 0;
};

// Turns the lines of one file into examples.
// Thread safety: ParseLine may be called concurrently (it is const and keeps
// no state between lines).
class LineParser {
 public:
  virtual ~LineParser() = default;

  // Parses `line` (one line, without its line ending) and appends one example
  // to `out`, whose shape is the format's layout: num_labels labels,
  // num_dense dense values, num_slots offsets (each the end of its bag in
  // out->keys, so bags come in slot order) and the keys of the bags. It does
  // not change out->size. Returns false and fills *error if the line is bad;
  // `out` may then hold part of the example, which the caller removes (see
  // ParseLines in text_reader.h).
  virtual bool ParseLine(std::string_view line, Batch* out, LineError* error) const = 0;
};

// A text format: how the lines of a file become examples. Formats are built
// by their factories (NewCriteoFormat, NewDelimitedFormat, NewLibSvmFormat,
// NewLibFfmFormat, NewSlotFormat) or by name with MakeTextFormat
// (format_spec.h), and read with ReadTextFiles (text_reader.h).
// Thread safety: all methods are const and may be called concurrently.
class TextFormat {
 public:
  virtual ~TextFormat() = default;

  // "criteo", "csv", "libsvm", "libffm" or "slot".
  virtual const char* name() const = 0;
  virtual TextLayout layout() const = 0;
  // Whether the first line of every file is a header rather than an example.
  virtual bool has_header() const = 0;
  // The parser for one file. `header` is the file's first line (without its
  // line ending or a UTF-8 byte order mark) when has_header(), else empty.
  // InvalidArgument if the header does not fit the format (a column the
  // format needs is missing, ...); the message does not name the file, the
  // caller adds that.
  virtual Result<std::unique_ptr<LineParser>> NewLineParser(std::string_view header) const = 0;
};

}  // namespace ember::io
