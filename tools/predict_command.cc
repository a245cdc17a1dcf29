// `ember predict`: scores input with a serving bundle, one line of
// probabilities per example, streamed in bounded memory.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <string>
#include <vector>

#include "core/file.h"
#include "core/progress.h"
#include "engine/scorer.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/serving_flags.h"

namespace ember::tools {
namespace {

// Appends one line per example of `scores` (`tasks` per example) to `text`:
// tab-separated, each with 9 significant digits (a float's exact value).
void AppendScoreLines(const float* scores, int64_t examples, int tasks, std::string* text) {
  char number[32];
  for (int64_t i = 0; i < examples; ++i) {
    for (int t = 0; t < tasks; ++t) {
      const int n = std::snprintf(number, sizeof(number), "%.9g", scores[i * tasks + t]);
      text->append(number, n);
      text->push_back(t + 1 < tasks ? '\t' : '\n');
    }
  }
}

Status Predict() {
  LogEffectiveFlags({"tools/serving_flags.cc", "tools/format_flags.cc"});
  if (FLAGS_bundle.empty()) return Status::InvalidArgument("--bundle is required");
  if (FLAGS_predictions_out.empty()) {
    return Status::InvalidArgument("--predictions_out is required");
  }
  Result<std::unique_ptr<engine::Scorer>> scorer = OpenScorerFromFlags();
  if (!scorer.ok()) return scorer.status();
  // A bad line fails: every input line gets its score, in order.
  EMBER_ASSIGN_OR_RETURN(auto reader,
                         OpenScoringInput((*scorer)->config(), /*fail_on_bad_line=*/true));
  Result<std::unique_ptr<AtomicFileWriter>> out = AtomicFileWriter::Create(FLAGS_predictions_out);
  if (!out.ok()) return out.status().WithContext("--predictions_out");
  const int tasks = (*scorer)->num_tasks();
  ProgressReporter progress("predict examples", reader->EpochLines(0));
  int64_t examples = 0;
  std::string text;
  EMBER_RETURN_IF_ERROR(
      (*scorer)->ScoreAll(*reader, [&](const io::Batch& batch, const float* scores) {
        text.clear();
        AppendScoreLines(scores, batch.size, tasks, &text);
        examples += batch.size;
        progress.Update(examples);
        return (*out)->Write(text);
      }));
  EMBER_RETURN_IF_ERROR((*out)->Commit().WithContext("--predictions_out"));
  progress.Finish();
  std::printf("predict: %lld examples scored (%d task%s) into %s in %.2f s\n",
              static_cast<long long>(examples), tasks, tasks == 1 ? "" : "s",
              FLAGS_predictions_out.c_str(), progress.elapsed_seconds());
  return Status::OK();
}

}  // namespace

int RunPredict() {
  const Status status = Predict();
  if (!status.ok()) {
    std::fprintf(stderr, "ember predict: %s\n", status.ToString().c_str());
    return ExitCodeFor(status);
  }
  return kExitOk;
}

}  // namespace ember::tools
