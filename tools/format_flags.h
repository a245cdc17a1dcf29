#pragma once

// The flags that say how `ember train` and `ember convert` read input
// files: --format, one flag per key of io::FormatSpec (io/format_spec.h;
// the flag has the key's name, the csv dense defaults are --dense_transform,
// --dense_min and --dense_max), and the bad-line policy. Defined in
// format_flags.cc, where a registered text format's (io/text_format_registry.h)
// flags are DEFINEd and bound to its options, a row each.

#include <gflags/gflags_declare.h>

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/dataset.h"
#include "io/format_spec.h"
#include "io/stream_reader.h"
#include "io/text_reader.h"

DECLARE_string(format);
DECLARE_int32(slot_bits);
DECLARE_string(schema);
DECLARE_string(schema_file);
DECLARE_string(delimiter);
DECLARE_bool(header);
DECLARE_string(dense_transform);
DECLARE_string(dense_min);
DECLARE_string(dense_max);
DECLARE_string(field_starts);
DECLARE_int32(num_fields);
DECLARE_bool(require_binary_values);
DECLARE_string(slots);
DECLARE_string(dense_slots);
DECLARE_string(label_slots);
DECLARE_bool(feasign_first);
DECLARE_bool(ignore_unknown_slots);
DECLARE_string(bad_lines);
DECLARE_double(max_bad_ratio);

namespace ember::tools {

// The text format the flags describe: its name is --format, or criteo when
// --format is auto; every other field comes from its flag. InvalidArgument
// naming the flag for --format=columnar or another name the text-format
// registry lacks and for a bad --dense_transform, --dense_min or
// --dense_max. Whether the fields fit the format is checked by
// io::MakeTextFormat.
Result<io::FormatSpec> FormatSpecFromFlags();

// How a list of input files is read.
struct InputFormat {
  bool columnar = false;
  io::FormatSpec text;  // The text format, when !columnar.
  // "criteo", "csv", "libsvm", "libffm", "slot" or "columnar".
  std::string name() const { return columnar ? "columnar" : text.name; }
};

// Whether `path` is a columnar file by its name (*.col, *.ember) or its
// first bytes (the columnar magic "EMBERCOL"). A file that cannot be read
// is not (the reader then reports why).
bool LooksColumnar(const std::string& path);

// The format of the files `paths` under --format. auto: columnar when every
// path LooksColumnar, criteo when none does, InvalidArgument naming both
// kinds for a mix. With columnar input, InvalidArgument naming the flag if
// a text-format flag is set.
Result<InputFormat> ResolveInputFormat(const std::vector<std::string>& paths);

// --bad_lines, --max_bad_ratio and --threads as reader options;
// InvalidArgument naming --bad_lines for an unknown policy.
Result<io::TextReadOptions> TextReadOptionsFromFlags();

// Input files read into memory.
struct InputData {
  io::Dataset data;
  std::string format;  // As InputFormat::name().
  int slot_bits = 0;   // The key bits of the slot its keys were hashed with.
};

// Reads all of `paths` into memory in the format ResolveInputFormat gives:
// text with io::ReadTextFiles (bad lines counted in data.bad_lines()),
// columnar files one after the other (which must have the same shape and
// slot bits; --slot_bits, when set, must match theirs). With
// options.keep_every > 1, only one rank's share of the examples (every
// keep_every-th from keep_offset, in both formats). Errors as
// ResolveInputFormat, io::MakeTextFormat and the readers.
Result<InputData> ReadInput(const std::vector<std::string>& paths,
                            const io::TextReadOptions& options);

// Input files read in a stream.
struct InputStream {
  std::unique_ptr<io::StreamReader> reader;
  std::string format;  // As InputFormat::name().
  int slot_bits = 0;
};

// Opens a StreamReader over `paths` in the format ResolveInputFormat gives,
// with `options` (its bad-line policy and max_bad_ratio are replaced by
// --bad_lines and --max_bad_ratio). Columnar files must have one shape;
// --slot_bits, when set, must match theirs. Errors as ReadInput and
// StreamReader::OpenText / OpenColumnar.
Result<InputStream> OpenInputStream(const std::vector<std::string>& paths,
                                    io::StreamReaderOptions options);

}  // namespace ember::tools
