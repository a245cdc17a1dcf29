#pragma once

#include <cstdint>
#include <vector>

#include "core/random.h"
#include "embedding/embedding_table.h"

namespace ember::bench {

// Draws ranks in [0, n) with P(rank = k) proportional to (k + 1)^-exponent, by
// rejection-inversion (W. Hörmann and G. Derflinger, "Rejection-inversion to
// generate variates from monotone discrete distributions", ACM TOMACS 6(3),
// 1996): O(1) per draw and no table, whatever n.
// Thread safety: Sample is const; give each thread its own RandomStream.
class ZipfSampler {
 public:
  // REQUIRES: n >= 1, exponent > 0.
  ZipfSampler(uint64_t n, double exponent);
  uint64_t Sample(RandomStream& random) const;

 private:
  double H(double x) const;
  double HIntegral(double x) const;
  double HIntegralInverse(double x) const;

  uint64_t n_;
  double exponent_;
  double h_integral_x1_;
  double h_integral_n_;
  double s_;
};

enum class KeyDistribution { kZipf, kUniform };
const char* KeyDistributionName(KeyDistribution distribution);

// Keys in [0, rows). Zipf ranks go through a fixed permutation of [0, rows)
// (multiplication by a constant coprime to rows), so that hot keys are spread
// over the key space instead of being the first rows of an array.
struct KeyBatchOptions {
  int64_t rows = 1;
  KeyDistribution distribution = KeyDistribution::kZipf;
  double zipf_exponent = 1.05;
  uint64_t seed = 1;
};

// Thread safety: const methods may be called concurrently.
class KeyBatches {
 public:
  // REQUIRES: options.rows >= 1.
  explicit KeyBatches(const KeyBatchOptions& options);

  // The first `unique_keys` distinct keys of the draws of stream `index`
  // (fewer if rows < unique_keys), deduplicated with embedding::UniqueKeys:
  // a batch of exactly `unique_keys` unique keys. Deterministic in
  // (options, unique_keys, index).
  std::vector<embedding::Key> UniqueBatch(int64_t unique_keys, uint64_t index) const;

  // The distinct keys among `draws` draws of stream `index`, in order of
  // first appearance: the keys of a training batch of `draws` samples.
  std::vector<embedding::Key> DedupedDraws(int64_t draws, uint64_t index) const;

 private:
  void Draw(RandomStream& random, int64_t count, std::vector<embedding::Key>* keys) const;

  KeyBatchOptions options_;
  ZipfSampler zipf_;
  uint64_t multiplier_;
};

}  // namespace ember::bench
