// Float and bfloat16 storage of row weights (embedding/internal/row_weights.h).

#include "embedding/internal/row_weights.h"

#include <bit>
#include <cstring>

#include "core/random.h"
#include "core/simd.h"

namespace ember::embedding::internal {
namespace {

// The 16-bit halves of a bfloat16 row, read in place: rows are float words
// (and disk rows start at multiples of 4 bytes), so 2-byte alignment holds;
// may_alias lets them be read through the words' float storage.
using Half = uint16_t __attribute__((may_alias));
using Word = uint32_t __attribute__((may_alias));

// Widening as a plain loop over the halves: the compiler vectorizes it (one
// zero-extend and shift per lane), in each ISA copy.
EMBER_MULTIVERSIONED
void WidenHalves(int dim, const Half* half, Word* out) {
  for (int e = 0; e < dim; ++e) out[e] = static_cast<uint32_t>(half[e]) << 16;
}

uint16_t NearestBf16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  // Round to nearest, ties to even: add 0x7fff plus the lowest kept bit.
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

uint16_t StochasticBf16(float value, uint32_t random16) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) >= 0x7f800000u) return NearestBf16(value);  // inf, NaN
  const uint32_t rounded = (bits + random16) >> 16;
  // A finite value must not round up to infinity.
  if ((rounded & 0x7f80u) == 0x7f80u) return static_cast<uint16_t>(bits >> 16);
  return static_cast<uint16_t>(rounded);
}

}  // namespace

int64_t WeightWords(WeightStorage storage, int dim) {
  return storage == WeightStorage::kBFloat16 ? (int64_t{dim} + 1) / 2 : dim;
}

void LoadWeights(WeightStorage storage, int dim, const float* words, float* out) {
  if (storage == WeightStorage::kFloat32) {
    std::memcpy(out, words, sizeof(float) * dim);
    return;
  }
  static_assert(sizeof(float) == sizeof(uint32_t));
  WidenHalves(dim, reinterpret_cast<const Half*>(words), reinterpret_cast<Word*>(out));
}

void StoreWeights(WeightStorage storage, int dim, const float* in, float* words) {
  if (storage == WeightStorage::kFloat32) {
    std::memcpy(words, in, sizeof(float) * dim);
    return;
  }
  Half* half = reinterpret_cast<Half*>(words);
  for (int e = 0; e < dim; ++e) {
    half[e] = NearestBf16(in[e]);
  }
  if (dim % 2 != 0) half[dim] = 0;  // the last word's spare half
}

void RoundWeights(WeightStorage storage, int dim, float* values) {
  if (storage == WeightStorage::kFloat32) return;
  for (int e = 0; e < dim; ++e) {
    values[e] = std::bit_cast<float>(static_cast<uint32_t>(NearestBf16(values[e])) << 16);
  }
}

void StoreUpdatedWeights(WeightStorage storage, int dim, const float* in, uint64_t key_hash,
                         float* words) {
  if (storage == WeightStorage::kFloat32) {
    std::memcpy(words, in, sizeof(float) * dim);
    return;
  }
  // One 64-bit draw gives four elements their 16 random bits. The stream's
  // seed mixes the key with the updated row (its first and last floats), so
  // the same key draws afresh at every update.
  const uint64_t seed = HashCombine(
      key_hash, (static_cast<uint64_t>(std::bit_cast<uint32_t>(in[0])) << 32) |
                    std::bit_cast<uint32_t>(in[dim - 1]));
  Half* half = reinterpret_cast<Half*>(words);
  uint64_t random = 0;
  for (int e = 0; e < dim; ++e) {
    if (e % 4 == 0) random = Mix64(seed + static_cast<uint64_t>(e) * 0x9e3779b97f4a7c15ULL);
    half[e] = StochasticBf16(in[e], static_cast<uint32_t>(random & 0xffffu));
    random >>= 16;
  }
  if (dim % 2 != 0) half[dim] = 0;
}

}  // namespace ember::embedding::internal
