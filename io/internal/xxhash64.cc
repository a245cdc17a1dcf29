#include "io/internal/xxhash64.h"

// Debian's xxHash (libxxhash-dev), inlined into this file: no library to
// link or to ship in the device pack.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace ember::io::internal {

uint64_t XxHash64(const void* data, size_t size, uint64_t seed) {
  return XXH64(data, size, seed);
}

}  // namespace ember::io::internal
