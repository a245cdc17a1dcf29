#pragma once

#include <cstdint>
#include <vector>

#include "embedding/embedding_table.h"

namespace ember::embedding {

// Deduplicates the keys of a batch: `unique` receives each distinct key once,
// in order of first appearance, and `index[i]` the position of keys[i] in
// `unique`. The result depends only on `keys`, so it is the same for any
// thread count. Linear time (open addressing in a table of the calling
// thread's, kept between calls), no allocation per key.
void UniqueKeys(const std::vector<Key>& keys, std::vector<Key>* unique,
                std::vector<int64_t>* index);

}  // namespace ember::embedding
