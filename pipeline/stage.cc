#include "pipeline/stage.h"

#include <iterator>

namespace ember::pipeline {

std::optional<Stage> StageTimes::Bottleneck() const {
  std::optional<Stage> best;
  for (Stage s : kAllStages) {
    if (busy_seconds[s] > 0 && (!best || busy_seconds[s] > busy_seconds[*best])) best = s;
  }
  return best;
}

double StageTimes::TotalSeconds() const {
  double total = 0.0;
  for (double s : busy_seconds) total += s;
  return total;
}

Result<PerStage<int>> WorkerStageThreads(const std::vector<int>& counts) {
  static constexpr Stage kListed[] = {Stage::kUnique, Stage::kPull, Stage::kDense, Stage::kPush};
  PerStage<int> threads;
  if (counts.empty()) return threads;
  if (counts.size() != std::size(kListed)) {
    return Status::InvalidArgument(
        "--stage_threads needs 4 counts (unique, pull, dense, push), got ", counts.size());
  }
  for (size_t i = 0; i < counts.size(); ++i) threads[kListed[i]] = counts[i];
  return threads;
}

}  // namespace ember::pipeline
