#pragma once

#include <cstdint>
#include <string_view>

#include "io/batch.h"

namespace ember::io {

// Default number of high key bits that hold the slot (1024 slots).
inline constexpr int kDefaultSlotBits = 10;

// Key of categorical `value` in `slot`: the slot in the high `slot_bits` bits,
// a 64-bit hash of the value's bytes (the same on every machine) in the rest.
// The empty value (missing) hashes to a key of its own.
// REQUIRES: 1 <= slot_bits <= 32 and 0 <= slot < 2^slot_bits.
Key HashCategorical(int slot, std::string_view value, int slot_bits = kDefaultSlotBits);

// The slot stored in `key`.
inline int SlotOfKey(Key key, int slot_bits = kDefaultSlotBits) {
  return static_cast<int>(key >> (64 - slot_bits));
}

// Criteo's dense transform: log(1 + x) for x > 0, 0 for x <= 0 or missing.
// (Criteo I2 has small negatives; treating them as 0 is the common choice.)
float LogTransform(double x);

}  // namespace ember::io
