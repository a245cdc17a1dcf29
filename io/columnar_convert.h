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
  // How the text files are read: bad-line policy, max_bad_ratio (over all
  // files) and parser threads.
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

// Called on the calling thread with the report so far (see each converter
// for how often).
using ConvertProgress = std::function<void(const ConvertReport&)>;

// Converts text files of `format` into one columnar file at `output`, with
// the rows of the files in file then line order: exactly the batch that
// ReadTextFiles(paths, format, options.read) reads, for every format.
// The text is read in a stream (StreamReader, on options.read.threads
// threads), so memory holds a few ~1 MiB pieces per thread and one row
// group, however large the input. The output appears atomically when every
// file is done; on an error no output is left (a previous file at `output`
// stays as it was). `progress` is called after every 4096 rows, with
// input_bytes estimated from the lines of the pieces reached (ahead by up
// to a piece); files is set at the end.
// Errors: those of StreamReader::OpenText and Next (bad lines past the
// policy name file and line; max_bad_ratio applies to all files together),
// InvalidArgument for no paths or an output path that cannot be written,
// those of ColumnarWriter.
Result<ConvertReport> ConvertTextToColumnar(const std::vector<std::string>& paths,
                                            const TextFormat& format, const std::string& output,
                                            const ConvertOptions& options,
                                            const ConvertProgress& progress = {});

// Copies the rows of columnar files, in order, into one columnar file at
// `output` cut into row groups as `options.write` says (to join files or
// change the group size). `progress` is called after each file. Memory: one row group of input and one of output.
// InvalidArgument naming the file when the files' shapes (labels, dense,
// slots, slot bits) differ; otherwise the errors of OpenColumnar, ReadRows
// and ColumnarWriter.
Result<ConvertReport> ConvertColumnarToColumnar(const std::vector<std::string>& paths,
                                                const std::string& output,
                                                const ConvertOptions& options,
                                                const ConvertProgress& progress = {});

}  // namespace ember::io
