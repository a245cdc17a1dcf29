#pragma once

#include <cstdint>
#include <utility>

#include "io/batch.h"
#include "io/dataset.h"

namespace ember::io::test {

// n examples with one dense feature equal to the example's index, two slots
// (the second a bag of index % 3 keys, so that bags differ in size) and
// label index % 2: which example went where is visible in every column.
inline Dataset Numbered(int n) {
  Batch all;
  all.Clear(1, 2);
  for (int i = 0; i < n; ++i) {
    all.labels.push_back(static_cast<float>(i % 2));
    all.dense.push_back(static_cast<float>(i));
    all.keys.push_back(static_cast<Key>(i));
    all.offsets.push_back(static_cast<int64_t>(all.keys.size()));
    for (int k = 0; k < i % 3; ++k) all.keys.push_back(static_cast<Key>(1000 * i + k));
    all.offsets.push_back(static_cast<int64_t>(all.keys.size()));
  }
  all.size = n;
  return Dataset(std::move(all));
}

}  // namespace ember::io::test
