// `ember gen-data`: writes synthetic click data from a planted model.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <memory>

#include "core/file.h"
#include "core/progress.h"
#include "io/synthetic.h"
#include "tools/commands.h"
#include "tools/common_flags.h"

DEFINE_string(out, "ember_synthetic.tsv",
              "gen-data: output path; PATH.meta.json is written beside it with the planted "
              "model's Bayes AUC and the flags that read the data.");
DEFINE_string(out_format, "criteo",
              "gen-data: output format: criteo (Criteo TSV; needs the default 13 dense and 26 "
              "single-valued slots), csv (comma-separated with a header, multi-hot ids "
              "separated by '|') or columnar (Ember's binary format, as `ember convert` "
              "writes; keys hashed with --slot_bits).");

namespace ember::tools {
namespace {

Status GenData() {
  LogEffectiveFlags({"tools/gen_data_command.cc"});
  EMBER_ASSIGN_OR_RETURN(io::SyntheticOptions options, SyntheticOptionsFromFlags());
  Result<io::SyntheticFormat> format = io::ParseSyntheticFormat(FLAGS_out_format);
  if (!format.ok()) return format.status().WithContext("--out_format");
  options.format = *format;
  EMBER_RETURN_IF_ERROR(io::ValidateSyntheticOptions(options));
  EMBER_RETURN_IF_ERROR(CheckWritableDestination(FLAGS_out).WithContext("--out"));
  ProgressReporter progress("gen-data rows", options.rows);
  EMBER_ASSIGN_OR_RETURN(
      io::SyntheticInfo info,
      io::WriteSynthetic(FLAGS_out, options, [&](int64_t rows) { progress.Update(rows); }));
  progress.Finish();
  std::printf(
      "wrote %lld rows to %s (%s; positive rate %.4f, planted Bayes AUC %.4f, "
      "logloss %.4f)\n",
      static_cast<long long>(info.rows), FLAGS_out.c_str(), io::SyntheticFormatName(options.format),
      info.positive_rate, info.bayes_auc, info.bayes_logloss);
  for (size_t t = 1; t < info.task_bayes_auc.size(); ++t) {
    std::printf("task %zu: planted Bayes AUC %.4f\n", t, info.task_bayes_auc[t]);
  }
  if (options.format == io::SyntheticFormat::kCsv) {
    std::printf("read it with: --format=csv --header --schema=%s\n",
                io::SyntheticCsvSchema(options).c_str());
  }
  return Status::OK();
}

}  // namespace

int RunGenData() {
  const Status status = GenData();
  if (!status.ok()) {
    std::fprintf(stderr, "ember gen-data: %s\n", status.ToString().c_str());
    return ExitCodeFor(status);
  }
  return kExitOk;
}

}  // namespace ember::tools
