#pragma once

// How a row's weights are held in memory and on disk (WeightStorage): as
// floats, or as bfloat16, the high half of a float, two to a 32-bit word.
// Arithmetic is always in float: a Pull widens the stored weights, a Push
// updates the widened weights and narrows them back. What StoredRows shows
// (checkpoints, exports) is always float, so a bfloat16 table's rows widen
// exactly and narrow back to the same bits.
//
// Narrowing an update rounds stochastically: a float between two bfloat16
// values goes to the upper one with probability equal to its distance from
// the lower one (in units of the gap), so that updates smaller than half a
// bfloat16 step still move a weight in expectation instead of being lost
// (the rounding FBGEMM's 16-bit tables use). The random bits are a pure
// function of the row's key and its updated float weights, so a run
// reproduces bit for bit whatever its threads or schedule.

#include <cstdint>

#include "embedding/embedding_table.h"

namespace ember::embedding::internal {

// 32-bit words that `dim` weights take: dim for kFloat32, ceil(dim / 2) for
// kBFloat16.
int64_t WeightWords(WeightStorage storage, int dim);

// Widens the stored weights `words` to `dim` floats in `out`.
void LoadWeights(WeightStorage storage, int dim, const float* words, float* out);

// Narrows `dim` floats to the stored form, rounding to nearest (ties to
// even): exact for floats that LoadWeights made. NaN stays NaN.
void StoreWeights(WeightStorage storage, int dim, const float* in, float* words);

// Rounds `dim` floats in place to what the storage holds of them (nearest,
// as StoreWeights): what LoadWeights gives back after StoreWeights.
void RoundWeights(WeightStorage storage, int dim, float* values);

// Narrows updated weights with stochastic rounding, its random bits drawn
// from (key_hash, the floats of `in`). For kFloat32 a copy.
void StoreUpdatedWeights(WeightStorage storage, int dim, const float* in, uint64_t key_hash,
                         float* words);

}  // namespace ember::embedding::internal
