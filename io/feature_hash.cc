#include "io/feature_hash.h"

#include <cmath>

#include <glog/logging.h>

#include "core/random.h"

namespace ember::io {

Key HashCategorical(int slot, std::string_view value, int slot_bits) {
  DCHECK_GE(slot_bits, 1);
  DCHECK_LE(slot_bits, 32);
  DCHECK_GE(slot, 0);
  DCHECK_LT(static_cast<uint64_t>(slot), uint64_t{1} << slot_bits);
  const int value_bits = 64 - slot_bits;
  const uint64_t value_mask = (uint64_t{1} << value_bits) - 1;
  const uint64_t slot_part = static_cast<uint64_t>(slot) << value_bits;
  // The missing value owns hash 0; every present value hashes to a nonzero
  // value, so missing never collides with a value of the same slot.
  if (value.empty()) return slot_part;
  // FNV-1a 64 over the bytes (defined byte by byte, so independent of
  // endianness and of the standard library), then SplitMix64's finaliser for
  // avalanche in the low bits that survive the mask.
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : value) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  uint64_t hashed = Mix64(h) & value_mask;
  if (hashed == 0) hashed = 1;
  return slot_part | hashed;
}

float LogTransform(double x) {
  // NaN fails the comparison and maps to 0 like a missing value.
  if (!(x > 0.0)) return 0.0f;
  return static_cast<float>(std::log1p(x));
}

}  // namespace ember::io
