// `ember eval`: AUC, logloss and calibration of a serving bundle on labelled
// data, as `ember train` reports its test metrics.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <string>
#include <vector>

#include "core/file.h"
#include "core/json.h"
#include "core/progress.h"
#include "engine/metrics.h"
#include "engine/scorer.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/serving_flags.h"
#include "tools/train_flags.h"

namespace ember::tools {
namespace {

Status Eval() {
  LogEffectiveFlags({"tools/serving_flags.cc", "tools/format_flags.cc"});
  if (FLAGS_bundle.empty()) return Status::InvalidArgument("--bundle is required");
  if (!FLAGS_labelled) {
    return Status::InvalidArgument("--labelled=false: eval needs the labels; use predict");
  }
  if (!FLAGS_metrics_out.empty()) {
    EMBER_RETURN_IF_ERROR(CheckWritableDestination(FLAGS_metrics_out).WithContext("--metrics_out"));
  }
  Result<std::unique_ptr<engine::Scorer>> scorer = OpenScorerFromFlags();
  if (!scorer.ok()) return scorer.status();
  const engine::BundleConfig& config = (*scorer)->config();
  EMBER_ASSIGN_OR_RETURN(auto reader, OpenScoringInput(config, /*fail_on_bad_line=*/false));
  const int tasks = (*scorer)->num_tasks();
  if (reader->num_labels() != tasks) {
    return Status::InvalidArgument("--data has ", reader->num_labels(),
                                   " labels per example, the bundle's model predicts ", tasks);
  }
  std::vector<float> predictions, labels;
  ProgressReporter progress("eval examples", reader->EpochLines(0));
  int64_t examples = 0;
  EMBER_RETURN_IF_ERROR(
      (*scorer)->ScoreAll(*reader, [&](const io::Batch& batch, const float* scores) {
        predictions.insert(predictions.end(), scores, scores + batch.size * tasks);
        labels.insert(labels.end(), batch.labels.begin(), batch.labels.end());
        examples += batch.size;
        progress.Update(examples);
        return Status::OK();
      }));
  progress.Finish();
  if (examples == 0) return Status::InvalidArgument("--data has no examples");
  const engine::Metrics test = engine::ComputeTaskMetrics(predictions, labels, tasks);
  PrintTestMetrics(test);
  std::fflush(stdout);
  if (FLAGS_metrics_out.empty()) return Status::OK();
  const Json root = {{"model", config.model.name},
                     {"bundle", FLAGS_bundle},
                     {"step", config.step},
                     {"test", TestMetricsJson(test)}};
  return WriteFileAtomic(FLAGS_metrics_out, JsonText(root, 2) + "\n").WithContext("--metrics_out");
}

}  // namespace

int RunEval() {
  const Status status = Eval();
  if (!status.ok()) {
    std::fprintf(stderr, "ember eval: %s\n", status.ToString().c_str());
    return ExitCodeFor(status);
  }
  return kExitOk;
}

}  // namespace ember::tools
