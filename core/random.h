#pragma once

#include <cstdint>

namespace ember {

// SplitMix64's finaliser: a bijective 64-bit mixer with full avalanche.
constexpr uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The inverse of Mix64: UnMix64(Mix64(x)) == x for every x.
constexpr uint64_t UnMix64(uint64_t x) {
  x ^= (x >> 31) ^ (x >> 62);
  x *= 0x319642b2d24d8ec3ULL;  // the inverse of 0x94d049bb133111eb mod 2^64
  x ^= (x >> 27) ^ (x >> 54);
  x *= 0x96de1b173f119089ULL;  // the inverse of 0xbf58476d1ce4e5b9 mod 2^64
  x ^= (x >> 30) ^ (x >> 60);
  return x - 0x9e3779b97f4a7c15ULL;
}

// Combines two 64-bit values into one well-mixed value (order matters).
constexpr uint64_t HashCombine(uint64_t a, uint64_t b) {
  return Mix64(a ^ Mix64(b + 0x632be59bd9b4e019ULL));
}

// A seeded, counter-based stream of random numbers. The sequence depends only
// on (seed, stream) — never on the platform, the standard library or thread
// timing — so that runs reproduce bit for bit everywhere.
// Thread safety: none; give each thread its own stream (e.g. stream = thread
// index or batch index).
class RandomStream {
 public:
  explicit RandomStream(uint64_t seed, uint64_t stream = 0)
      : key_(HashCombine(seed, stream)) {}

  uint64_t NextU64() { return Mix64(key_ + (counter_++) * 0xd1342543de82ef95ULL); }
  // Uniform in [0, 1) with 53 random bits.
  double NextDouble() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }
  // Uniform in [lo, hi).
  double Uniform(double lo, double hi) { return lo + (hi - lo) * NextDouble(); }
  // Uniform integer in [0, n). REQUIRES: n > 0.
  uint64_t NextBelow(uint64_t n);
  // Standard normal (Box-Muller; the second value is cached).
  double Normal();
  bool Bernoulli(double p) { return NextDouble() < p; }

 private:
  uint64_t key_;
  uint64_t counter_ = 0;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

// Uniform in [0, 1) as a pure function of (seed, key, index): for values that
// must not depend on when or where they are computed, such as the initial
// value of an embedding row created on first sight.
inline double UniformAt(uint64_t seed, uint64_t key, uint64_t index) {
  return static_cast<double>(HashCombine(HashCombine(seed, key), index) >> 11) * 0x1.0p-53;
}

}  // namespace ember
