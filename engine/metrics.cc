#include "engine/metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <glog/logging.h>

namespace ember::engine {

double ComputeAuc(const std::vector<float>& scores, const std::vector<float>& labels) {
  CHECK_EQ(scores.size(), labels.size()) << "one label per score";
  const size_t n = scores.size();
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return scores[a] < scores[b]; });
  // Sum of the (average, 1-based) ranks of the positives.
  double positive_rank_sum = 0.0;
  double positives = 0.0;
  size_t i = 0;
  while (i < n) {
    size_t j = i;
    while (j < n && scores[order[j]] == scores[order[i]]) ++j;
    const double average_rank = 0.5 * static_cast<double>(i + 1 + j);
    for (size_t k = i; k < j; ++k) {
      if (labels[order[k]] > 0.5f) {
        positive_rank_sum += average_rank;
        positives += 1.0;
      }
    }
    i = j;
  }
  const double negatives = static_cast<double>(n) - positives;
  if (positives == 0.0 || negatives == 0.0) return 0.5;
  return (positive_rank_sum - positives * (positives + 1.0) / 2.0) / (positives * negatives);
}

double ComputeLogLoss(const std::vector<float>& probabilities, const std::vector<float>& labels) {
  CHECK_EQ(probabilities.size(), labels.size()) << "one label per probability";
  if (probabilities.empty()) return 0.0;
  constexpr double kClip = 1e-7;
  double sum = 0.0;
  for (size_t i = 0; i < probabilities.size(); ++i) {
    const double p = std::clamp(static_cast<double>(probabilities[i]), kClip, 1.0 - kClip);
    const double y = labels[i];
    sum -= y * std::log(p) + (1.0 - y) * std::log(1.0 - p);
  }
  return sum / static_cast<double>(probabilities.size());
}

Metrics ComputeMetrics(const std::vector<float>& probabilities, const std::vector<float>& labels) {
  Metrics metrics;
  metrics.examples = static_cast<int64_t>(labels.size());
  if (labels.empty()) return metrics;
  metrics.auc = ComputeAuc(probabilities, labels);
  metrics.logloss = ComputeLogLoss(probabilities, labels);
  const double mean_p =
      std::accumulate(probabilities.begin(), probabilities.end(), 0.0) / labels.size();
  metrics.positive_rate = std::accumulate(labels.begin(), labels.end(), 0.0) / labels.size();
  metrics.calibration = metrics.positive_rate > 0 ? mean_p / metrics.positive_rate : 0.0;
  return metrics;
}

Metrics ComputeTaskMetrics(const std::vector<float>& probabilities,
                           const std::vector<float>& labels, int num_tasks) {
  if (num_tasks == 1) return ComputeMetrics(probabilities, labels);
  const size_t examples = probabilities.size() / num_tasks;
  std::vector<Metrics> tasks;
  std::vector<float> p(examples), y(examples);
  for (int t = 0; t < num_tasks; ++t) {
    for (size_t i = 0; i < examples; ++i) {
      p[i] = probabilities[i * num_tasks + t];
      y[i] = labels[i * num_tasks + t];
    }
    tasks.push_back(ComputeMetrics(p, y));
  }
  Metrics metrics = tasks.front();
  metrics.tasks = std::move(tasks);
  return metrics;
}

}  // namespace ember::engine
