#pragma once

#include <cstdint>

#include "embedding/embedding_table.h"

// The initial value of a row created on first sight. Every tier uses these,
// so that a row's first value is the same wherever and whenever it is made.

namespace ember::embedding {

// The half-width s of the initial range: options.init_scale, or 1/sqrt(dim)
// when init_scale <= 0. REQUIRES: options.dim >= 1.
float InitScale(const EmbeddingTableOptions& options);

// Writes the initial weights of `key`'s row: element e is
// s * (2 * UniformAt(seed, key, e) - 1), computed in double and rounded to
// float, so it lies in [-s, s] and depends only on (seed, key, e).
// REQUIRES: weights has room for dim floats.
void InitRowWeights(uint64_t seed, Key key, float scale, int dim, float* weights);

}  // namespace ember::embedding
