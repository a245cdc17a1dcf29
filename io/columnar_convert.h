#pragma once

// Conversion of input files to Ember's columnar format (columnar.h), what
// `ember convert` runs.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/columnar.h"
#include "io/dataset.h"
#include "io/feature_hash.h"
#include "io/text_format.h"
#include "io/text_reader.h"

namespace ember::io {

struct ConvertOptions {
  // How each text file is read: bad-line policy, max_bad_ratio (checked per
  // file) and parser threads.
  TextReadOptions read;
  // Row groups of the output.
  ColumnarWriteOptions write;
  // The slot bits the text format hashes with, recorded in the output's
  // header (ColumnarShape::slot_bits). Text input only.
  int slot_bits = kDefaultSlotBits;
};

// What a conversion did, so far (progress) or in total.
struct ConvertReport {
  int64_t files = 0;         // Input files done.
  int64_t rows = 0;          // Rows written.
  int64_t input_bytes = 0;   // Bytes of the input files done, as stored (.gz compressed).
  int64_t output_bytes = 0;  // Size of the output; set when it is finished.
  int64_t row_groups = 0;    // Row groups of the output; set when it is finished.
  BadLineReport bad_lines;   // Lines of the text files done, over all of them.
};

// Called on the calling thread after each input file with the report so far.
using ConvertProgress = std::function<void(const ConvertReport&)>;

// Converts text files of `format` into one columnar file at `output`, with
// the rows of the files in file then line order: exactly the batch that
// ReadTextFiles(paths, format, options.read) reads, for every format.
// One file at a time: each is read whole with ReadTextFiles and appended to
// a streaming ColumnarWriter, so memory holds the examples of the largest
// file (about 4 bytes per label and dense value and 16 per key of a
// single-valued slot: ~470 bytes per Criteo row, ~20 GiB for a 45M-row
// Criteo day) plus one row group. The output appears atomically when every
// file is done; on an error no output is left (a previous file at `output`
// stays as it was).
// Errors: those of ReadTextFiles (bad lines past the policy name file and
// line; max_bad_ratio applies to each file), InvalidArgument for no paths or
// an output path that cannot be written, those of ColumnarWriter.
Result<ConvertReport> ConvertTextToColumnar(const std::vector<std::string>& paths,
                                            const TextFormat& format, const std::string& output,
                                            const ConvertOptions& options,
                                            const ConvertProgress& progress = {});

// Copies the rows of columnar files, in order, into one columnar file at
// `output` cut into row groups as `options.write` says (to join files or
// change the group size). Memory: one row group of input and one of output.
// InvalidArgument naming the file when the files' shapes (labels, dense,
// slots, slot bits) differ; otherwise the errors of OpenColumnar, ReadRows
// and ColumnarWriter.
Result<ConvertReport> ConvertColumnarToColumnar(const std::vector<std::string>& paths,
                                                const std::string& output,
                                                const ConvertOptions& options,
                                                const ConvertProgress& progress = {});

}  // namespace ember::io
