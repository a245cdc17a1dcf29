#include "embedding/row_init.h"

#include <cmath>

#include "core/random.h"
#include "core/simd.h"

namespace ember::embedding {

float InitScale(const EmbeddingTableOptions& options) {
  if (options.init_scale > 0.0f) return options.init_scale;
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(options.dim)));
}

namespace {

// HashCombine(a, e) is Mix64(a ^ Mix64(e + c)): the inner mix depends on the
// element index alone, so for the first kMixedIndices elements it is a table.
constexpr int kMixedIndices = 256;

struct MixedIndices {
  uint64_t value[kMixedIndices];
};

constexpr MixedIndices MixIndices() {
  MixedIndices mixed{};
  for (int e = 0; e < kMixedIndices; ++e) {
    mixed.value[e] = Mix64(static_cast<uint64_t>(e) + 0x632be59bd9b4e019ULL);
  }
  return mixed;
}

constexpr MixedIndices kMixed = MixIndices();

// weights[e] for e in [0, n), n <= kMixedIndices, given base =
// HashCombine(seed, key). UniformAt's bits are below 2^53 and are converted
// to double in two exact 32-bit halves: the same double, and a loop that
// vectorizes without AVX512-DQ. Compiled per ISA level (core/simd.h); lanes
// are independent, the same bits on every copy. Row creation in the suite's
// DLRM 2-thread case: 1.2% -> 0.8% of the profile (the scalar loop mixed the
// index anew for every element).
EMBER_MULTIVERSIONED
void InitFirstWeights(uint64_t base, double s, int n, float* weights) {
  for (int e = 0; e < n; ++e) {
    const uint64_t bits = Mix64(base ^ kMixed.value[e]) >> 11;
    const double u = (static_cast<double>(static_cast<uint32_t>(bits >> 32)) * 0x1.0p32 +
                      static_cast<double>(static_cast<uint32_t>(bits))) *
                     0x1.0p-53;
    weights[e] = static_cast<float>(s * (2.0 * u - 1.0));
  }
}

}  // namespace

void InitRowWeights(uint64_t seed, Key key, float scale, int dim, float* weights) {
  const double s = scale;
  const int first = dim < kMixedIndices ? dim : kMixedIndices;
  InitFirstWeights(HashCombine(seed, key), s, first, weights);
  for (int e = first; e < dim; ++e) {
    weights[e] = static_cast<float>(s * (2.0 * UniformAt(seed, key, static_cast<uint64_t>(e)) - 1.0));
  }
}

}  // namespace ember::embedding
