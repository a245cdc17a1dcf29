// `ember gen-data`: writes synthetic Criteo-format data from a planted model.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <memory>

#include "core/progress.h"
#include "io/synthetic.h"
#include "tools/commands.h"
#include "tools/common_flags.h"

DEFINE_string(out, "ember_synthetic.tsv",
              "gen-data: output path of the Criteo-format TSV; PATH.meta.json is written "
              "beside it with the planted model's Bayes AUC.");

namespace ember::tools {

int RunGenData() {
  LogEffectiveFlags("tools/gen_data_command.cc");
  const io::SyntheticOptions options = SyntheticOptionsFromFlags();
  ProgressReporter progress("gen-data rows", options.rows);
  Result<io::SyntheticInfo> info = io::WriteSyntheticCriteo(
      FLAGS_out, options, [&](int64_t rows) { progress.Update(rows); });
  if (!info.ok()) {
    std::fprintf(stderr, "ember gen-data: %s\n", info.status().ToString().c_str());
    return ExitCodeFor(info.status());
  }
  progress.Finish();
  std::printf("wrote %lld rows to %s (positive rate %.4f, planted Bayes AUC %.4f, logloss %.4f)\n",
              static_cast<long long>(info->rows), FLAGS_out.c_str(), info->positive_rate,
              info->bayes_auc, info->bayes_logloss);
  return kExitOk;
}

}  // namespace ember::tools
