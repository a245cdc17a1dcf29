#pragma once

#include <cstdint>
#include <vector>

namespace ember::engine {

// Area under the ROC curve of `scores` against 0/1 `labels`, exact: ties in
// score count one half (the Mann-Whitney statistic with average ranks).
// Returns 0.5 when all labels are equal (AUC is undefined there).
// REQUIRES: scores.size() == labels.size().
double ComputeAuc(const std::vector<float>& scores, const std::vector<float>& labels);

// Mean binary cross-entropy of probabilities against labels, with
// probabilities clipped to [1e-7, 1 - 1e-7].
double ComputeLogLoss(const std::vector<float>& probabilities, const std::vector<float>& labels);

// Evaluation summary of a set of predictions.
struct Metrics {
  int64_t examples = 0;
  double auc = 0.5;
  double logloss = 0.0;
  // Mean prediction over mean label; 1 is perfectly calibrated.
  double calibration = 0.0;
  double positive_rate = 0.0;
  // Multi-task predictions: the metrics of each task (the fields above are
  // those of task 0). Empty for a single task.
  std::vector<Metrics> tasks;
};

Metrics ComputeMetrics(const std::vector<float>& probabilities, const std::vector<float>& labels);

// Metrics of `num_tasks` tasks from example-major probabilities and labels
// (example i's task t at i * num_tasks + t): task 0's in the top-level
// fields and, when num_tasks > 1, every task's in `tasks`.
// REQUIRES: num_tasks >= 1, both sizes equal and a multiple of num_tasks.
Metrics ComputeTaskMetrics(const std::vector<float>& probabilities,
                           const std::vector<float>& labels, int num_tasks);

}  // namespace ember::engine
