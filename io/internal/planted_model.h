#pragma once

// The planted model that synthetic.cc draws its rows from: per-id weights
// and latent vectors, the dense features' distributions and weights, the
// extra tasks' weights and the clusters' teacher networks, all a function of
// SyntheticOptions (see the model described in synthetic.h).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include "io/synthetic.h"

namespace ember::io::internal {

// Probability that a dense feature (other than a cluster feature) is missing.
inline constexpr double kDenseMissingRate = 0.1;
// A cluster feature's log count is N(mu, kClusterModeScale) shifted by
// -/+ kClusterModeShift: two modes with a gap of about 2 x shift between them.
inline constexpr double kClusterModeScale = 0.5;
inline constexpr double kClusterModeShift = 1.5;

// The planted model that every row is drawn from. Each id's parameters are a
// function of (seed, slot, id) alone.
// Not copyable: slot_cdf points into the model's own zipf_cdfs.
// Thread safety: immutable once built; const access may be shared by threads.
struct PlantedModel {
  PlantedModel() = default;
  PlantedModel(const PlantedModel&) = delete;
  PlantedModel& operator=(const PlantedModel&) = delete;
  PlantedModel(PlantedModel&&) = default;
  PlantedModel& operator=(PlantedModel&&) = default;

  int num_slots = 0;
  int rank = 0;
  int interacting_slots = 0;
  int first_multi_hot = 0;  // Slots from here on hold bags.
  int max_bag_size = 1;
  std::vector<int64_t> vocabulary;  // [num_slots]
  // Zipf CDF of each distinct vocabulary: P(id <= i), i < vocabulary.
  std::map<int64_t, std::vector<double>> zipf_cdfs;
  std::vector<const std::vector<double>*> slot_cdf;  // [num_slots], into zipf_cdfs
  std::vector<int64_t> weight_begin;  // [num_slots + 1]: slot s's weights in id_weights
  std::vector<int64_t> latent_begin;  // [interacting_slots + 1]: rows in latents
  std::vector<float> id_weights;      // [sum of vocabularies]
  int num_tasks = 1;
  // Tasks 1.. num_tasks-1: their own id weights, task after task, each
  // laid out as id_weights.
  std::vector<float> task_weights;
  // With num_clusters > 1, each cluster's teacher network over the pairs of
  // interacting slots (pair (a, b), a < b, in row-major order), `units`
  // hidden units: input weights [clusters x units x pairs], biases and
  // output weights [clusters x units], and an offset per cluster that
  // centres its output. Its input is each pair's dot product times
  // pair_input_scale. Empty when num_clusters is 1.
  int num_clusters = 1;
  int cluster_units = 0;
  double pair_input_scale = 0.0;
  std::vector<double> teacher_in;
  std::vector<double> teacher_bias;
  std::vector<double> teacher_out;
  std::vector<double> teacher_offset;
  // Dense features 0 .. cluster_bits-1 place a row in its cluster.
  int cluster_bits = 0;
  std::vector<float> latents;        // [latent rows x rank]
  std::vector<double> dense_mu;      // [num_dense]: mean of log(1 + count)
  std::vector<double> dense_weight;  // [num_dense]
  std::vector<double> dense_center;  // [num_dense]: E[LogTransform(value)]
};

// Builds the planted model of `options`: a pure function of them (the same
// options give the same model bit for bit, whatever the thread count). Uses
// ParallelFor over the slots.
// REQUIRES: ValidateSyntheticOptions(options).ok().
// Thread safety: may be called concurrently.
PlantedModel BuildModel(const SyntheticOptions& options);

// The vocabulary of each slot: options.slot_vocabularies, or num_slots
// copies of options.vocabulary when that is empty.
// Thread safety: a pure function.
std::vector<int64_t> SlotVocabularies(const SyntheticOptions& options);

// Bits of the cluster: ceil(log2(num_clusters)), 0 for 1.
// REQUIRES: num_clusters <= 2^30.
// Thread safety: a pure function.
int ClusterBits(int num_clusters);

// The normal draw of a cluster feature moved to one of two modes by its
// sign: N(0, 1) becomes kClusterModeScale * z -/+ kClusterModeShift.
// Thread safety: a pure function.
inline double ClusterModeNormal(double normal) {
  return kClusterModeScale * normal + (normal > 0.0 ? kClusterModeShift : -kClusterModeShift);
}

// A dense feature's count from its mean log count `mu` and a normal draw:
// floor(exp(N(mu, 1))) - 1, at least 0.
// Thread safety: a pure function.
inline int64_t DenseCount(double mu, double normal) {
  const double count = std::floor(std::exp(std::min(mu + normal, 40.0))) - 1.0;
  return count > 0.0 ? static_cast<int64_t>(count) : 0;
}

// Cluster `cluster`'s teacher network at the scaled pair products `x`
// ([pairs]), before its offset: sum_h out_h * relu(in_h . x + bias_h).
// REQUIRES: 0 <= cluster < model.num_clusters; `pairs` is
// model.interacting_slots choose 2.
// Thread safety: a pure function of its arguments.
double RawTeacher(const PlantedModel& model, int cluster, const double* x, int64_t pairs);

}  // namespace ember::io::internal
