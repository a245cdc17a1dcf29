// Building the planted model of synthetic.cc (planted_model.h): its tables
// are drawn from random streams keyed by (seed, tag, slot, id), so the model
// depends on the options alone.

#include "io/internal/planted_model.h"

#include <algorithm>
#include <cmath>

#include "core/random.h"
#include "core/threads.h"
#include "io/feature_hash.h"

namespace ember::io::internal {
namespace {

constexpr double kDenseWeightScale = 0.15;
// Samples used to estimate each dense feature's mean log count.
constexpr int kDenseCenterSamples = 4096;

// Tags that keep the random streams of the model apart from the rows'.
constexpr uint64_t kIdWeightTag = 0x1d3f5a7c9e0b2d4fULL;
constexpr uint64_t kLatentTag = 0x2e4c6a8b0d1f3e5aULL;
constexpr uint64_t kDenseTag = 0x3f5d7b9a1c2e4f60ULL;
constexpr uint64_t kDenseCenterTag = 0x4a6c8e0f2b3d5f71ULL;
constexpr uint64_t kTaskWeightTag = 0x5b7d9f1a3c4e6082ULL;
constexpr uint64_t kClusterTag = 0x6c8e0a2b4d5f7193ULL;
constexpr uint64_t kClusterNormTag = 0x7d9f1b3c5e6a8204ULL;
// Samples of Gaussian latents used to centre and scale each cluster's
// teacher network.
constexpr int kClusterNormSamples = 8192;
// The scale of the id weights of tasks after the first, relative to
// id_weight_scale.
constexpr double kTaskWeightScale = 0.7;

void BuildDenseModel(const SyntheticOptions& options, PlantedModel* model) {
  model->cluster_bits = options.num_clusters > 1 ? ClusterBits(options.num_clusters) : 0;
  for (int j = 0; j < options.num_dense; ++j) {
    const bool cluster_feature = j < model->cluster_bits;
    RandomStream rng(HashCombine(options.seed, kDenseTag), j);
    const double mu = rng.Uniform(-0.5, 4.0);
    model->dense_mu.push_back(mu);
    model->dense_weight.push_back(kDenseWeightScale * rng.Normal());
    // Centring keeps the dense term's mean near 0, so the click rate is set
    // by `bias` whatever the seed; a constant is still learnable as bias.
    RandomStream sampler(HashCombine(options.seed, kDenseCenterTag), j);
    double sum = 0.0;
    for (int i = 0; i < kDenseCenterSamples; ++i) {
      const double normal =
          cluster_feature ? ClusterModeNormal(sampler.Normal()) : sampler.Normal();
      sum += LogTransform(static_cast<double>(DenseCount(mu, normal)));
    }
    // Cluster features are never missing.
    const double present = cluster_feature ? 1.0 : 1.0 - kDenseMissingRate;
    model->dense_center.push_back(present * sum / kDenseCenterSamples);
  }
}

// Shifts each slot's weights so that their mean under the Zipf distribution
// is 0: the click rate is then set by `bias` rather than by which ids the
// seed happened to make heavy. A per-slot constant is learnable as bias.
void CenterIdWeights(PlantedModel* model, float* all_weights) {
  for (int slot = 0; slot < model->num_slots; ++slot) {
    const int64_t vocab = model->vocabulary[slot];
    const std::vector<double>& cdf = *model->slot_cdf[slot];
    float* weights = all_weights + model->weight_begin[slot];
    double mean = 0.0;
    double previous_cdf = 0.0;
    for (int64_t id = 0; id < vocab; ++id) {
      mean += (cdf[id] - previous_cdf) * weights[id];
      previous_cdf = cdf[id];
    }
    for (int64_t id = 0; id < vocab; ++id) weights[id] -= static_cast<float>(mean);
  }
}

// Zipf: P(id = i) proportional to (i + 1)^-s; id 0 is the most frequent.
std::vector<double> ZipfCdf(int64_t vocab, double exponent) {
  std::vector<double> cdf(vocab);
  double total = 0.0;
  for (int64_t i = 0; i < vocab; ++i) {
    total += std::pow(static_cast<double>(i + 1), -exponent);
    cdf[i] = total;
  }
  for (double& c : cdf) c /= total;
  cdf.back() = 1.0;
  return cdf;
}

// Clusters: for each, a random one-hidden-layer ReLU teacher over the pair
// products (see SyntheticOptions::num_clusters): input weights N(0, 1 /
// pairs) (a unit's pre-activation has about unit variance), biases
// U(-1, 1), output weights N(0, 1); then each output is centred and scaled
// to a standard deviation of cluster_scale, both measured on pair products
// of Gaussian latents.
void BuildClusters(const SyntheticOptions& options, PlantedModel* model) {
  model->num_clusters = options.num_clusters;
  if (options.num_clusters == 1) return;
  const int clusters = options.num_clusters, units = options.cluster_units;
  const int slots = options.interacting_slots, rank = options.latent_rank;
  const int64_t pairs = int64_t{slots} * (slots - 1) / 2;
  model->cluster_units = units;
  // A pair's product of N(0, scale^2 I_rank) vectors has a variance of
  // rank * scale^4.
  const double dot_std =
      options.interaction_scale * options.interaction_scale * std::sqrt(std::max(rank, 1));
  model->pair_input_scale = dot_std > 0.0 ? 1.0 / dot_std : 0.0;
  model->teacher_in.resize(int64_t{clusters} * units * pairs);
  model->teacher_bias.resize(int64_t{clusters} * units);
  model->teacher_out.resize(int64_t{clusters} * units);
  model->teacher_offset.assign(clusters, 0.0);
  const double in_scale = pairs > 0 ? 1.0 / std::sqrt(static_cast<double>(pairs)) : 0.0;
  for (int c = 0; c < clusters; ++c) {
    const uint64_t cluster_seed = HashCombine(HashCombine(options.seed, kClusterTag), c);
    for (int h = 0; h < units; ++h) {
      const int64_t unit = int64_t{c} * units + h;
      RandomStream rng(cluster_seed, h);
      for (int64_t p = 0; p < pairs; ++p) {
        model->teacher_in[unit * pairs + p] = in_scale * rng.Normal();
      }
      model->teacher_bias[unit] = rng.Uniform(-1.0, 1.0);
      model->teacher_out[unit] = rng.Normal();
    }
  }
  // Centre and scale on the same samples for every cluster.
  std::vector<double> latent(int64_t{slots} * rank), x(pairs), sum(clusters), sum2(clusters);
  RandomStream sampler(HashCombine(options.seed, kClusterNormTag), 0);
  for (int i = 0; i < kClusterNormSamples; ++i) {
    for (double& v : latent) v = sampler.Normal();
    for (int a = 0, p = 0; a < slots; ++a) {
      for (int b = a + 1; b < slots; ++b, ++p) {
        double dot = 0.0;
        for (int k = 0; k < rank; ++k) dot += latent[a * rank + k] * latent[b * rank + k];
        x[p] = dot / std::sqrt(std::max(rank, 1));
      }
    }
    for (int c = 0; c < clusters; ++c) {
      const double y = RawTeacher(*model, c, x.data(), pairs);
      sum[c] += y;
      sum2[c] += y * y;
    }
  }
  for (int c = 0; c < clusters; ++c) {
    const double mean = sum[c] / kClusterNormSamples;
    const double var = std::max(sum2[c] / kClusterNormSamples - mean * mean, 1e-12);
    const double gain = options.cluster_scale / std::sqrt(var);
    for (int h = 0; h < units; ++h) model->teacher_out[int64_t{c} * units + h] *= gain;
    model->teacher_offset[c] = -mean * gain;
  }
}

}  // namespace

std::vector<int64_t> SlotVocabularies(const SyntheticOptions& options) {
  if (!options.slot_vocabularies.empty()) return options.slot_vocabularies;
  return std::vector<int64_t>(options.num_slots, options.vocabulary);
}

int ClusterBits(int num_clusters) {
  int bits = 0;
  while ((1 << bits) < num_clusters) ++bits;
  return bits;
}

double RawTeacher(const PlantedModel& model, int cluster, const double* x, int64_t pairs) {
  double y = 0.0;
  for (int h = 0; h < model.cluster_units; ++h) {
    const int64_t unit = int64_t{cluster} * model.cluster_units + h;
    const double* in = model.teacher_in.data() + unit * pairs;
    double z = model.teacher_bias[unit];
    for (int64_t p = 0; p < pairs; ++p) z += in[p] * x[p];
    if (z > 0.0) y += model.teacher_out[unit] * z;
  }
  return y;
}

PlantedModel BuildModel(const SyntheticOptions& options) {
  PlantedModel model;
  model.num_slots = options.num_slots;
  model.rank = options.latent_rank;
  model.interacting_slots = options.interacting_slots;
  model.first_multi_hot = options.num_slots - options.multi_hot_slots;
  model.max_bag_size = options.max_bag_size;
  model.vocabulary = SlotVocabularies(options);
  model.weight_begin.push_back(0);
  model.latent_begin.push_back(0);
  for (int slot = 0; slot < options.num_slots; ++slot) {
    const int64_t vocab = model.vocabulary[slot];
    auto [it, inserted] = model.zipf_cdfs.try_emplace(vocab);
    if (inserted) it->second = ZipfCdf(vocab, options.zipf_exponent);
    model.slot_cdf.push_back(&it->second);
    model.weight_begin.push_back(model.weight_begin.back() + vocab);
    if (slot < options.interacting_slots) {
      model.latent_begin.push_back(model.latent_begin.back() + vocab);
    }
  }
  model.id_weights.resize(model.weight_begin.back());
  model.latents.resize(model.latent_begin.back() * options.latent_rank);
  ParallelFor(0, options.num_slots, 1, [&](int64_t begin, int64_t end) {
    for (int64_t slot = begin; slot < end; ++slot) {
      const uint64_t weight_seed = HashCombine(HashCombine(options.seed, kIdWeightTag), slot);
      const uint64_t latent_seed = HashCombine(HashCombine(options.seed, kLatentTag), slot);
      for (int64_t id = 0; id < model.vocabulary[slot]; ++id) {
        RandomStream weight(weight_seed, id);
        model.id_weights[model.weight_begin[slot] + id] =
            static_cast<float>(options.id_weight_scale * weight.Normal());
        if (slot >= options.interacting_slots) continue;
        RandomStream latent(latent_seed, id);
        float* vec = model.latents.data() + (model.latent_begin[slot] + id) * options.latent_rank;
        for (int k = 0; k < options.latent_rank; ++k) {
          vec[k] = static_cast<float>(options.interaction_scale * latent.Normal());
        }
      }
    }
  });
  CenterIdWeights(&model, model.id_weights.data());
  model.num_tasks = options.num_tasks;
  const int64_t weights_per_task = model.weight_begin.back();
  model.task_weights.resize((options.num_tasks - 1) * weights_per_task);
  for (int t = 1; t < options.num_tasks; ++t) {
    float* weights = model.task_weights.data() + (t - 1) * weights_per_task;
    ParallelFor(0, options.num_slots, 1, [&](int64_t begin, int64_t end) {
      for (int64_t slot = begin; slot < end; ++slot) {
        const uint64_t seed =
            HashCombine(HashCombine(HashCombine(options.seed, kTaskWeightTag), t), slot);
        for (int64_t id = 0; id < model.vocabulary[slot]; ++id) {
          RandomStream weight(seed, id);
          weights[model.weight_begin[slot] + id] = static_cast<float>(
              kTaskWeightScale * options.id_weight_scale * weight.Normal());
        }
      }
    });
    CenterIdWeights(&model, weights);
  }
  BuildDenseModel(options, &model);
  BuildClusters(options, &model);
  return model;
}

}  // namespace ember::io::internal
