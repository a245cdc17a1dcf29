#pragma once

// Delimited text with a schema ("csv"): Avazu, TalkingData, MovieLens u.data
// and most in-house logs. Each line is one example; fields are separated by
// one delimiter byte (',' by default, tab, ...); the schema gives each column
// a role.
//
// Roles:
//   label        The example's label: a number in [0, 1] ("0", "1", "0.25"),
//                or with threshold=t any number, giving 1 if it is >= t and
//                0 otherwise (ratings: threshold=4). Several label columns
//                make a multi-task example (labels in schema order).
//   dense        A number ("7", "-2.5", "1e3"; not "nan" or "inf"): clipped
//                to [min, max] if given, then transformed: log1p (the
//                default: LogTransform of feature_hash.h, log(1 + x) for
//                x > 0 and 0 otherwise, for counts) or raw (unchanged). An
//                empty field is missing and gives 0, whatever the options.
//   cat          A categorical value, any bytes: one key HashCategorical(
//   (categorical)  slot, value, slot_bits), where slot is the column's index
//                among the cat and multi columns in schema order. An empty
//                field is missing and hashes as "" (a key of its own).
//   multi        A bag of categorical values separated by an inner delimiter
//                (sep=, default '|'): one key per non-empty value, in order;
//                an empty field is an empty bag.
//   ignore       Not read (its field must still be there).
// Fields are taken as they are: no quoting, no trimming of blanks.
//
// Which column an entry means: a name (matched against the header; needs a
// header), a 0-based column index ("3") or an inclusive range of them
// ("1-13", one column per index, all with the same role and options), or
// nothing: then the column after the previous entry's (the first column for
// the first entry). Without a header, names are only labels for messages.
// Columns no entry mentions are ignored. A line must have exactly as many
// fields as the header has, or, without a header, as the highest column the
// schema mentions plus one.
//
// The compact schema spec (a flag value): entries separated by ',', each
//   [ref=]role[:option]...
// e.g. "is_attributed=label,ip=cat,app=cat,click_time=ignore" or
// "label,1-13=dense,14-39=cat". Options: log1p, raw, min=<x>, max=<x>
// (dense); sep=<c> (multi; c is one byte or one of comma, tab, space,
// semicolon, colon, pipe, since ',' and ':' cannot appear in a spec);
// threshold=<x> (label). Blanks around entries are ignored.
//
// The schema file: one entry per line, "ref role [option ...]" separated by
// blanks, where ref is a name, index, range or "-" (the next column); '#'
// starts a comment; blank lines are skipped. For example:
//   # TalkingData train_sample.csv (with header)
//   ip              cat
//   click_time      ignore
//   attributed_time ignore   # leaks the label
//   is_attributed   label
//
// Bad lines: "column count" (a blank line inside a file too), "bad label"
// (empty, not a number, or outside [0, 1] without a threshold),
// "unparsable number" (a dense field), "line too long" (text_reader.h).

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "io/feature_hash.h"
#include "io/text_format.h"

namespace ember::io {

enum class ColumnRole { kLabel, kDense, kCategorical, kMulti, kIgnore };
enum class DenseTransform { kLog1p, kRaw };

// How dense values become features. Clipping is to the raw value, before the
// transform.
struct DenseOptions {
  DenseTransform transform = DenseTransform::kLog1p;
  std::optional<double> min;  // No lower bound if unset.
  std::optional<double> max;  // No upper bound if unset.
};

// One schema entry: a role for one column or a range of columns.
struct ColumnSpec {
  // Which column(s): `name` (bound by the header when there is one), or the
  // 0-based indices [first_index, last_index] when first_index >= 0, or
  // neither (the column after the previous entry's).
  std::string name;
  int first_index = -1;
  int last_index = -1;
  ColumnRole role = ColumnRole::kIgnore;
  // kDense: overrides of the format's dense defaults, field by field.
  std::optional<DenseTransform> transform;
  std::optional<double> min;
  std::optional<double> max;
  // kLabel: label = (value >= threshold) if set; else the value, in [0, 1].
  std::optional<double> threshold;
  // kMulti: separates the values of a bag.
  char inner_delimiter = '|';
};

struct DelimitedSchema {
  std::vector<ColumnSpec> columns;
};

// Parses the compact spec. InvalidArgument naming the entry for an unknown
// role or option, an option of another role, a bad number, index or range,
// a duplicate name, an inner delimiter that is not one byte, min > max, or
// a schema without a label column.
Result<DelimitedSchema> ParseSchemaSpec(std::string_view spec);
// Parses the text of a schema file; `source` names it in messages
// ("schema.txt:3: unknown role ..."). Same checks as ParseSchemaSpec.
Result<DelimitedSchema> ParseSchemaText(std::string_view text, std::string_view source);
// Reads and parses a schema file (NotFound / IOError if it cannot be read).
Result<DelimitedSchema> ReadSchemaFile(const std::string& path);

// A field delimiter given as one byte or a name: comma, tab, space,
// semicolon, colon, pipe. InvalidArgument otherwise (and for '\n', '\r').
Result<char> ParseDelimiter(std::string_view text);

struct DelimitedFormatOptions {
  DelimitedSchema schema;
  char delimiter = ',';
  // Whether the first line of each file names the columns.
  bool header = false;
  // For dense columns whose entry does not say otherwise.
  DenseOptions dense_defaults;
  int slot_bits = kDefaultSlotBits;
};

// The "csv" format. InvalidArgument for a schema without a label column,
// two entries for one column, a column index over 65535, an inner delimiter
// equal to the delimiter, min > max, more categorical slots than slot_bits
// allow, or slot_bits outside [1, 32]. With a header, each file's header is
// checked when it is opened: InvalidArgument "path:1: ..." for a schema name
// it lacks (or has twice), an index past its last column or two entries for
// one column.
Result<std::unique_ptr<TextFormat>> NewDelimitedFormat(const DelimitedFormatOptions& options);

}  // namespace ember::io
