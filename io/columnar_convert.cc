#include "io/columnar_convert.h"

#include <filesystem>
#include <memory>
#include <utility>

#include "core/file.h"
#include "io/stream_reader.h"

namespace ember::io {
namespace {

// Rows per batch taken from the stream reader and appended to the writer.
constexpr int64_t kConvertBatchRows = 4096;

// Fills in what only the finished output tells: its size and row groups.
Status DescribeOutput(const std::string& output, ConvertReport* report) {
  ColumnarReadOptions options;
  options.verify_checksums = ChecksumPolicy::kNever;
  EMBER_ASSIGN_OR_RETURN(auto file, OpenColumnar(output, options));
  report->output_bytes = file->file_bytes();
  report->row_groups = file->num_row_groups();
  return Status::OK();
}

Status CheckPaths(const std::vector<std::string>& paths, const std::string& output) {
  if (paths.empty()) return Status::InvalidArgument("no input files to convert");
  EMBER_RETURN_IF_ERROR(CheckWritableDestination(output));
  for (const std::string& path : paths) {
    std::error_code error;
    if (std::filesystem::equivalent(path, output, error)) {
      return Status::InvalidArgument(path, ": the output would overwrite this input");
    }
  }
  return Status::OK();
}

std::string ShapeText(const ColumnarShape& shape) {
  return ::ember::internal::StrCat(shape.num_labels, " labels, ", shape.num_dense, " dense, ",
                                   shape.num_slots, " slots, ", shape.slot_bits, " slot bits");
}

}  // namespace

Result<ConvertReport> ConvertTextToColumnar(const std::vector<std::string>& paths,
                                            const TextFormat& format, const std::string& output,
                                            const ConvertOptions& options,
                                            const ConvertProgress& progress) {
  EMBER_RETURN_IF_ERROR(CheckPaths(paths, output));
  const TextLayout layout = format.layout();
  ColumnarShape shape;
  shape.num_labels = layout.num_labels;
  shape.num_dense = layout.num_dense;
  shape.num_slots = layout.num_slots;
  shape.slot_bits = options.slot_bits;
  EMBER_ASSIGN_OR_RETURN(auto writer, ColumnarWriter::Open(output, shape, options.write));
  // The text in a stream, in file then line order, on the reader's threads:
  // memory holds the pieces in flight and one row group, whatever the input.
  StreamReaderOptions stream;
  stream.batch_size = kConvertBatchRows;
  stream.threads = options.read.threads;
  stream.bad_lines = options.read.bad_lines;
  stream.max_bad_ratio = options.read.max_bad_ratio;
  EMBER_ASSIGN_OR_RETURN(auto reader, StreamReader::OpenText(paths, format, stream));
  const int64_t input_bytes = TotalFileBytes(paths);
  const int64_t input_lines = reader->EpochLines(0);
  ConvertReport report;
  Batch batch;
  while (true) {
    EMBER_ASSIGN_OR_RETURN(const bool more, reader->Next(&batch));
    if (!more) break;
    EMBER_RETURN_IF_ERROR(writer->Append(batch));
    report.rows += batch.size;
    report.bad_lines = reader->bad_lines();
    // The bytes done, estimated from the lines read (the index counted them).
    report.input_bytes =
        input_lines > 0 ? static_cast<int64_t>(static_cast<double>(input_bytes) *
                                               report.bad_lines.lines_read / input_lines)
                        : 0;
    if (progress) progress(report);
  }
  report.bad_lines = reader->bad_lines();
  report.files = static_cast<int64_t>(paths.size());
  report.input_bytes = input_bytes;
  EMBER_RETURN_IF_ERROR(writer->Finish());
  EMBER_RETURN_IF_ERROR(DescribeOutput(output, &report));
  return report;
}

Result<ConvertReport> ConvertColumnarToColumnar(const std::vector<std::string>& paths,
                                                const std::string& output,
                                                const ConvertOptions& options,
                                                const ConvertProgress& progress) {
  EMBER_RETURN_IF_ERROR(CheckPaths(paths, output));
  std::unique_ptr<ColumnarWriter> writer;
  ColumnarShape shape;
  ConvertReport report;
  Batch rows;
  for (const std::string& path : paths) {
    EMBER_ASSIGN_OR_RETURN(auto file, OpenColumnar(path));
    if (writer == nullptr) {
      shape = file->shape();
      EMBER_ASSIGN_OR_RETURN(writer, ColumnarWriter::Open(output, shape, options.write));
    } else if (!(file->shape() == shape)) {
      return Status::InvalidArgument(path, ": rows of ", ShapeText(file->shape()), " after ",
                                     paths.front(), "'s ", ShapeText(shape));
    }
    for (int64_t g = 0; g < file->num_row_groups(); ++g) {
      const int64_t begin = file->RowGroupBegin(g);
      EMBER_RETURN_IF_ERROR(file->ReadRows(begin, begin + file->RowGroupRows(g), &rows));
      EMBER_RETURN_IF_ERROR(writer->Append(rows));
    }
    ++report.files;
    report.rows += file->rows();
    report.input_bytes += file->file_bytes();
    if (progress) progress(report);
  }
  EMBER_RETURN_IF_ERROR(writer->Finish());
  EMBER_RETURN_IF_ERROR(DescribeOutput(output, &report));
  return report;
}

}  // namespace ember::io
