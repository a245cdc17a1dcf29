#include "io/columnar_convert.h"

#include <filesystem>
#include <memory>
#include <utility>

#include "core/file.h"

namespace ember::io {
namespace {

int64_t FileBytes(const std::string& path) {
  std::error_code error;
  const uintmax_t bytes = std::filesystem::file_size(path, error);
  return error ? 0 : static_cast<int64_t>(bytes);
}

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
  ConvertReport report;
  for (const std::string& path : paths) {
    // One file's examples at a time: they are dropped before the next file.
    EMBER_ASSIGN_OR_RETURN(const Dataset data, ReadTextFiles({path}, format, options.read));
    EMBER_RETURN_IF_ERROR(writer->Append(data.all()));
    MergeBadLineReport(data.bad_lines(), &report.bad_lines);
    ++report.files;
    report.rows += data.size();
    report.input_bytes += FileBytes(path);
    if (progress) progress(report);
  }
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
