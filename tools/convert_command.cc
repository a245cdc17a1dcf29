// `ember convert`: converts input files to Ember's columnar format.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/file.h"
#include "core/progress.h"
#include "io/columnar_convert.h"
#include "tools/commands.h"
#include "tools/flag_validators.h"
#include "tools/format_flags.h"

DEFINE_string(input, "",
              "convert: input files, comma-separated; items with *, ? or [ are glob patterns "
              "(e.g. 'logs/day_*.tsv.gz'). Read in --format, in the order given.");
DEFINE_string(output, "",
              "convert: the columnar file to write (e.g. train.col); it appears atomically when "
              "every input file is converted.");
DEFINE_int64(rows_per_group, ember::io::ColumnarWriteOptions().rows_per_group,
             "convert: rows per row group of the output (the unit of reading and of checksum "
             "checks; the writer holds one group in memory).");
DEFINE_validator(rows_per_group, &ember::tools::IsPositive64);

namespace ember::tools {
namespace {

double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

Status Convert() {
  LogEffectiveFlags({"tools/convert_command.cc", "tools/format_flags.cc"});
  EMBER_ASSIGN_OR_RETURN(const std::vector<std::string> paths,
                         ExpandPathList("input", FLAGS_input));
  if (paths.empty()) {
    return Status::InvalidArgument("--input is empty: give the files to convert");
  }
  if (FLAGS_output.empty()) {
    return Status::InvalidArgument("--output is empty: give the columnar file to write");
  }
  EMBER_RETURN_IF_ERROR(CheckWritableDestination(FLAGS_output).WithContext("--output"));
  EMBER_ASSIGN_OR_RETURN(const InputFormat format, ResolveInputFormat(paths));
  io::ConvertOptions options;
  EMBER_ASSIGN_OR_RETURN(options.read, TextReadOptionsFromFlags());
  options.write.rows_per_group = FLAGS_rows_per_group;
  options.slot_bits = format.text.slot_bits;
  LOG(INFO) << "converting " << paths.size() << " " << format.name() << " file(s) to "
            << FLAGS_output;

  const auto start = std::chrono::steady_clock::now();
  ProgressReporter progress("convert input bytes", TotalFileBytes(paths));
  const io::ConvertProgress on_file = [&](const io::ConvertReport& so_far) {
    progress.Update(so_far.input_bytes, [&] { return std::to_string(so_far.rows) + " rows"; });
  };
  std::unique_ptr<io::TextFormat> text;
  if (!format.columnar) {
    Result<std::unique_ptr<io::TextFormat>> made = io::MakeTextFormat(format.text);
    if (!made.ok()) return made.status().WithContext("--format=" + FLAGS_format);
    text = *std::move(made);
  }
  Result<io::ConvertReport> report =
      format.columnar ? io::ConvertColumnarToColumnar(paths, FLAGS_output, options, on_file)
                      : io::ConvertTextToColumnar(paths, *text, FLAGS_output, options, on_file);
  if (!report.ok()) return report.status();
  progress.Finish();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "converted %lld %s file(s), %.1f MiB, to %s: %lld rows in %lld row groups, "
      "%.1f MiB, %.1f s\n",
      static_cast<long long>(report->files), format.name().c_str(), MiB(report->input_bytes),
      FLAGS_output.c_str(), static_cast<long long>(report->rows),
      static_cast<long long>(report->row_groups), MiB(report->output_bytes), seconds);
  if (!format.columnar) {
    const io::BadLineReport& bad = report->bad_lines;
    std::printf("bad lines: %s%s%s\n", io::BadLineTotals(bad).c_str(),
                bad.first_examples.empty() ? "" : "; first: ",
                bad.first_examples.empty() ? "" : bad.first_examples.front().c_str());
  }
  return Status::OK();
}

}  // namespace

int RunConvert() {
  const Status status = Convert();
  if (!status.ok()) {
    std::fprintf(stderr, "ember convert: %s\n", status.ToString().c_str());
    return ExitCodeFor(status);
  }
  return kExitOk;
}

}  // namespace ember::tools
