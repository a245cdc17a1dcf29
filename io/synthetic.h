#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"

namespace ember::io {

// A planted logistic model over Criteo-shaped features. Each slot's ids are
// Zipf-distributed over a vocabulary; each id carries a weight and a latent
// vector; dense features are counts whose log1p carries a weight; the label
// is Bernoulli(sigmoid(bias + dense term + id weights + pairwise latent
// interactions between slots)). A model that learns the planted function
// reaches the Bayes AUC, which is computed from the true probabilities.
//
// Details: id weights ~ N(0, id_weight_scale) are shifted per slot so that
// their Zipf-weighted mean is 0, and the dense term is w_j * (LogTransform(x_j)
// - E[LogTransform(x_j)]) with w_j ~ N(0, 0.15); both shifts are constants a
// model absorbs in its bias, and they keep the click rate set by `bias`
// whatever the seed. Dense count j is floor(exp(N(mu_j, 1))) - 1 (at least 0)
// with mu_j ~ U(-0.5, 4); 10% of dense values are missing (written empty,
// LogTransform 0). With the defaults: click rate about 0.27, Bayes AUC about
// 0.82. The defaults are chosen so that one epoch of DLRM at its Criteo sizes
// comes within about 0.02 AUC of that ceiling (a smaller vocabulary or more
// rows make the id weights easier to learn; weaker interactions, too).
struct SyntheticOptions {
  int64_t rows = 1000000;
  uint64_t seed = 1;
  int num_dense = 13;
  int num_slots = 26;
  // Distinct ids per slot (the same for every slot).
  int64_t vocabulary = 200;
  // Zipf exponent of the id distribution in each slot.
  double zipf_exponent = 1.05;
  // Standard deviation of each id's weight.
  double id_weight_scale = 0.3;
  // Rank and scale of the latent vectors whose dot products add pairwise
  // interactions between the first `interacting_slots` slots.
  int latent_rank = 4;
  int interacting_slots = 6;
  double interaction_scale = 0.15;
  // Intercept of the logit; sets the click rate (about 25% by default).
  double bias = -1.45;
};

// What the generator knows about the data it wrote.
struct SyntheticInfo {
  int64_t rows = 0;
  double positive_rate = 0.0;
  // AUC and logloss of the planted (true) probabilities on the rows written:
  // the ceiling a perfect model would reach on them.
  double bayes_auc = 0.0;
  double bayes_logloss = 0.0;
};

// Validates options: rows >= 1, num_dense in [0, 64], num_slots in [1, 1023],
// vocabulary in [1, 2^32], zipf_exponent > 0, scales >= 0, latent_rank in
// [0, 256], interacting_slots in [0, num_slots], a finite bias, and planted
// tables (vocabulary x (slots + interacting_slots x latent_rank)) under 2 GiB.
// InvalidArgument naming the field otherwise.
Status ValidateSyntheticOptions(const SyntheticOptions& options);

// Writes `options.rows` examples to `path` as Criteo TSV (ids as 8-digit hex,
// dense counts as decimal integers, some dense values missing; with 13 dense
// and 26 slots ReadCriteoFiles reads it without bad lines), and
// `path + ".meta.json"` with the options and the SyntheticInfo. Both writes are
// atomic. The bytes depend only on the options (seed included).
// Row r is drawn from RandomStream(seed, r), so a shorter file is a prefix of
// a longer one. Memory: the planted tables plus 9 bytes per row (the true
// probabilities and labels, for the exact AUC) and a few chunks of text.
// `progress`, when set, is called on the calling thread about every 100k rows
// with the rows written so far, and last with `rows`.
// Fails with InvalidArgument (options) or IOError (writing).
Result<SyntheticInfo> WriteSyntheticCriteo(const std::string& path,
                                           const SyntheticOptions& options,
                                           const std::function<void(int64_t)>& progress = {});

// Reads the "bayes_auc" field of `data_path + ".meta.json"`; NotFound if there
// is no such file, InvalidArgument if it has no numeric "bayes_auc".
Result<double> ReadSyntheticBayesAuc(const std::string& data_path);

}  // namespace ember::io
