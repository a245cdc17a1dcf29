#include "tools/bench/key_batches.h"

#include <glog/logging.h>

#include <cmath>
#include <numeric>

#include "embedding/unique_keys.h"

namespace ember::bench {
namespace {

// log1p(x) / x and expm1(x) / x, continuous at 0 (Taylor series near it).
double Log1pOverX(double x) {
  return std::abs(x) > 1e-8 ? std::log1p(x) / x : 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
}
double Expm1OverX(double x) {
  return std::abs(x) > 1e-8 ? std::expm1(x) / x
                            : 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x));
}

// Draws before UniqueBatch gives up on reaching its count, per requested key:
// a guard against exponents so steep that a batch would take forever.
constexpr int64_t kMaxDrawsPerUniqueKey = 1024;

}  // namespace

// Notation of Hörmann & Derflinger: h(x) = x^-s on ranks 1..n, H its integral.
ZipfSampler::ZipfSampler(uint64_t n, double exponent) : n_(n), exponent_(exponent) {
  CHECK_GE(n, 1u) << "Zipf over an empty range";
  CHECK_GT(exponent, 0.0) << "Zipf exponent must be positive";
  h_integral_x1_ = HIntegral(1.5) - 1.0;
  h_integral_n_ = HIntegral(static_cast<double>(n) + 0.5);
  s_ = 2.0 - HIntegralInverse(HIntegral(2.5) - H(2.0));
}

uint64_t ZipfSampler::Sample(RandomStream& random) const {
  while (true) {
    const double u = h_integral_n_ + random.NextDouble() * (h_integral_x1_ - h_integral_n_);
    const double x = HIntegralInverse(u);
    double k = std::floor(x + 0.5);
    if (k < 1.0) k = 1.0;
    if (k > static_cast<double>(n_)) k = static_cast<double>(n_);
    // Accept at once where the hat is tight, otherwise compare with the area.
    if (k - x <= s_ || u >= HIntegral(k + 0.5) - H(k)) return static_cast<uint64_t>(k) - 1;
  }
}

double ZipfSampler::H(double x) const { return std::exp(-exponent_ * std::log(x)); }

double ZipfSampler::HIntegral(double x) const {
  const double log_x = std::log(x);
  return Expm1OverX((1.0 - exponent_) * log_x) * log_x;
}

double ZipfSampler::HIntegralInverse(double x) const {
  double t = x * (1.0 - exponent_);
  if (t < -1.0) t = -1.0;  // rounding can push it just below the domain
  return std::exp(Log1pOverX(t) * x);
}

const char* KeyDistributionName(KeyDistribution distribution) {
  return distribution == KeyDistribution::kZipf ? "zipf" : "uniform";
}

KeyBatches::KeyBatches(const KeyBatchOptions& options)
    : options_(options),
      zipf_(static_cast<uint64_t>(options.rows), options.zipf_exponent),
      multiplier_(0x9e3779b97f4a7c15ULL % static_cast<uint64_t>(options.rows)) {
  const uint64_t rows = static_cast<uint64_t>(options.rows);
  if (multiplier_ == 0) multiplier_ = 1;
  while (std::gcd(multiplier_, rows) != 1) ++multiplier_;
}

void KeyBatches::Draw(RandomStream& random, int64_t count,
                      std::vector<embedding::Key>* keys) const {
  const uint64_t rows = static_cast<uint64_t>(options_.rows);
  for (int64_t i = 0; i < count; ++i) {
    if (options_.distribution == KeyDistribution::kUniform) {
      keys->push_back(random.NextBelow(rows));
    } else {
      const uint64_t rank = zipf_.Sample(random);
      keys->push_back(static_cast<uint64_t>(static_cast<__uint128_t>(rank) * multiplier_ % rows));
    }
  }
}

std::vector<embedding::Key> KeyBatches::UniqueBatch(int64_t unique_keys, uint64_t index) const {
  RandomStream random(options_.seed, index);
  std::vector<embedding::Key> draws, unique;
  std::vector<int64_t> positions;
  const int64_t wanted = std::min(unique_keys, options_.rows);
  // Doubling the draws keeps the deduplication linear in the final count;
  // the first `wanted` distinct keys do not depend on where the draws stop.
  int64_t target = wanted;
  while (true) {
    Draw(random, target - static_cast<int64_t>(draws.size()), &draws);
    embedding::UniqueKeys(draws, &unique, &positions);
    if (static_cast<int64_t>(unique.size()) >= wanted || target >= kMaxDrawsPerUniqueKey * wanted) {
      break;
    }
    target *= 2;
  }
  if (static_cast<int64_t>(unique.size()) > wanted) unique.resize(wanted);
  return unique;
}

std::vector<embedding::Key> KeyBatches::DedupedDraws(int64_t draws, uint64_t index) const {
  RandomStream random(options_.seed, index);
  std::vector<embedding::Key> keys, unique;
  std::vector<int64_t> positions;
  keys.reserve(draws);
  Draw(random, draws, &keys);
  embedding::UniqueKeys(keys, &unique, &positions);
  return unique;
}

}  // namespace ember::bench
