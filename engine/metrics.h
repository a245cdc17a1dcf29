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
};

Metrics ComputeMetrics(const std::vector<float>& probabilities, const std::vector<float>& labels);

}  // namespace ember::engine
