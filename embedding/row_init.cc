#include "embedding/row_init.h"

#include <cmath>

#include "core/random.h"

namespace ember::embedding {

float InitScale(const EmbeddingTableOptions& options) {
  if (options.init_scale > 0.0f) return options.init_scale;
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(options.dim)));
}

void InitRowWeights(uint64_t seed, Key key, float scale, int dim, float* weights) {
  const double s = scale;
  for (int e = 0; e < dim; ++e) {
    weights[e] = static_cast<float>(s * (2.0 * UniformAt(seed, key, static_cast<uint64_t>(e)) - 1.0));
  }
}

}  // namespace ember::embedding
