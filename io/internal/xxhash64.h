#pragma once

#include <cstddef>
#include <cstdint>

namespace ember::io::internal {

// XXH64 of `size` bytes at `data` with `seed`: the 64-bit xxHash of Yann
// Collet, as Debian's libxxhash computes it (the header inlined, nothing
// linked). Used as the section checksum of the columnar format.
uint64_t XxHash64(const void* data, size_t size, uint64_t seed = 0);

}  // namespace ember::io::internal
