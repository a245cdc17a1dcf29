#pragma once

// Rows for tier tests: a row is a pure function of (key, version), and says
// which (key, version) it was made for, so that a test can tell a stale row
// or one of another key from the right one.

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/random.h"
#include "embedding/tier.h"

namespace ember::test {

using embedding::Key;

// Returns the row of `key` at `version`: the version's and the key's bytes
// (as far as they fit) followed by bytes drawn from both.
inline std::vector<char> RowOf(Key key, uint64_t version, int64_t row_bytes) {
  std::vector<char> row(row_bytes);
  char header[16];
  std::memcpy(header, &version, 8);
  std::memcpy(header + 8, &key, 8);
  const uint64_t seed = HashCombine(key, version);
  for (int64_t j = 0; j < row_bytes; ++j) {
    row[j] = j < 16 ? header[j] : static_cast<char>(Mix64(seed + j));
  }
  return row;
}

// The rows of `keys` at `version`, one after the other.
inline std::vector<char> RowsOf(const std::vector<Key>& keys, uint64_t version, int64_t row_bytes) {
  std::vector<char> rows;
  rows.reserve(keys.size() * row_bytes);
  for (Key key : keys) {
    std::vector<char> row = RowOf(key, version, row_bytes);
    rows.insert(rows.end(), row.begin(), row.end());
  }
  return rows;
}

// The version recorded in a row made by RowOf. REQUIRES: row_bytes >= 8.
inline uint64_t VersionOf(const char* row) {
  uint64_t version;
  std::memcpy(&version, row, 8);
  return version;
}

// Index of the first of `indices` whose row in `out` (row i at i * row_bytes)
// is not RowOf(keys[i], version), or -1 if they all are.
inline int64_t FirstWrongRow(const std::vector<Key>& keys, const std::vector<int64_t>& indices,
                             const std::vector<char>& out, uint64_t version, int64_t row_bytes) {
  for (int64_t i : indices) {
    std::vector<char> expected = RowOf(keys[i], version, row_bytes);
    if (std::memcmp(expected.data(), out.data() + i * row_bytes, row_bytes) != 0) return i;
  }
  return -1;
}

// 0, 1, ..., n - 1.
inline std::vector<int64_t> AllIndices(int64_t n) {
  std::vector<int64_t> indices(n);
  for (int64_t i = 0; i < n; ++i) indices[i] = i;
  return indices;
}

// `n` distinct keys spread over the 64-bit range, in no particular order.
inline std::vector<Key> SpreadKeys(int64_t n, uint64_t seed) {
  std::vector<Key> keys(n);
  // Mix64 is a bijection, so distinct inputs give distinct keys.
  for (int64_t i = 0; i < n; ++i) keys[i] = Mix64(HashCombine(seed, 0) + static_cast<uint64_t>(i));
  return keys;
}

}  // namespace ember::test
