#pragma once

// Keys, gradients and stored rows for the embedding table tests.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <vector>

#include <gtest/gtest.h>

#include "core/random.h"
#include "core/status.h"
#include "embedding/embedding_table.h"
#include "embedding/row_init.h"
#include "embedding/stored_rows.h"

namespace ember::embedding {

// Names RowMeta's fields in gtest's output.
inline void PrintTo(const RowMeta& m, std::ostream* out) {
  *out << "{frequency " << m.frequency << ", last_seen_step " << m.last_seen_step << "}";
}

}  // namespace ember::embedding

namespace ember::test {

using embedding::EmbeddingTable;
using embedding::EmbeddingTableOptions;
using embedding::Key;

// `n` distinct keys spread over the whole 64-bit range, 0 and the largest
// key included, sorted.
inline std::vector<Key> DistinctKeys(int64_t n, uint64_t seed) {
  constexpr Key kMaxKey = std::numeric_limits<Key>::max();
  std::vector<Key> keys = {0, kMaxKey};
  RandomStream random(seed);
  while (static_cast<int64_t>(keys.size()) < n) keys.push_back(random.NextU64());
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  keys.resize(std::min<int64_t>(n, keys.size()));
  return keys;
}

// `n` random keys, sorted, duplicates dropped.
inline std::vector<Key> RandomKeys(int64_t n, uint64_t seed) {
  std::vector<Key> keys;
  RandomStream random(seed);
  while (static_cast<int64_t>(keys.size()) < n) keys.push_back(random.NextU64());
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

// Distinct keys of batch `step`: Zipf-like draws (u^4 puts most mass on few
// of `universe` keys), spread over the key space by an odd multiplier, in an
// order that is not sorted.
inline std::vector<Key> BatchKeys(uint64_t seed, int64_t step, int draws,
                                  int64_t universe = 20000) {
  RandomStream random(seed, static_cast<uint64_t>(step));
  std::vector<Key> keys(draws);
  for (Key& key : keys) {
    const double u = static_cast<double>(random.NextU64() >> 11) * 0x1.0p-53;
    key = static_cast<Key>(u * u * u * u * universe) * 0x9e3779b97f4a7c15ULL;
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  for (size_t i = keys.size(); i > 1; --i) std::swap(keys[i - 1], keys[random.NextBelow(i)]);
  return keys;
}

// A gradient for each of `keys` at `step`: a pure function of (key, step).
inline std::vector<float> Gradients(const std::vector<Key>& keys, int64_t step, int dim) {
  std::vector<float> grads(keys.size() * dim);
  for (size_t i = 0; i < keys.size(); ++i) {
    for (int e = 0; e < dim; ++e) {
      grads[i * dim + e] = static_cast<float>(UniformAt(keys[i], step, e) - 0.5);
    }
  }
  return grads;
}

struct RunOptions {
  int steps = 120;
  int draws = 400;
  bool prefetch = false;
  // Checked after every call when > 0.
  int64_t budget_bytes = 0;
};

// Runs Pull/Push over the batches BatchKeys(1, step, run.draws) of steps
// [0, run.steps), evicting expired rows every 10 steps, and returns every
// pulled value.
inline std::vector<float> TrainOnBatches(EmbeddingTable& table, const RunOptions& run) {
  const int dim = table.dim();
  std::vector<float> pulled;
  std::vector<float> out;
  for (int step = 0; step < run.steps; ++step) {
    table.set_step(step);
    if (step % 10 == 9) table.EvictExpired();
    const std::vector<Key> keys = BatchKeys(1, step, run.draws);
    if (run.prefetch) table.Prefetch(BatchKeys(1, step + 1, run.draws));
    out.assign(keys.size() * dim, -1.0f);
    EXPECT_TRUE(table.Pull(keys, out.data()).ok());
    if (run.budget_bytes > 0) {
      EXPECT_LE(table.memory_bytes(), run.budget_bytes) << "after Pull";
    }
    pulled.insert(pulled.end(), out.begin(), out.end());
    const std::vector<float> grads = Gradients(keys, step, dim);
    EXPECT_TRUE(table.Push(keys, grads.data()).ok());
    if (run.budget_bytes > 0) {
      EXPECT_LE(table.memory_bytes(), run.budget_bytes) << "after Push";
    }
  }
  return pulled;
}

inline std::vector<float> PullAll(EmbeddingTable& table, const std::vector<Key>& keys) {
  std::vector<float> out(keys.size() * table.dim(), std::nanf(""));
  Status status = table.Pull(keys, out.data());
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

inline void PushAll(EmbeddingTable& table, const std::vector<Key>& keys,
                    const std::vector<float>& grads) {
  Status status = table.Push(keys, grads.data());
  EXPECT_TRUE(status.ok()) << status;
}

// The weights a new row of `key` starts with.
inline std::vector<float> InitialRow(const EmbeddingTableOptions& options, Key key) {
  std::vector<float> row(options.dim);
  embedding::InitRowWeights(options.seed, key, embedding::InitScale(options), options.dim,
                            row.data());
  return row;
}

// The initial weights of `keys`' rows, one after the other.
inline std::vector<float> ExpectedInitialRows(const EmbeddingTableOptions& options,
                                              const std::vector<Key>& keys) {
  std::vector<float> rows;
  for (Key key : keys) {
    const std::vector<float> row = InitialRow(options, key);
    rows.insert(rows.end(), row.begin(), row.end());
  }
  return rows;
}

struct StoredRow {
  Key key;
  std::vector<float> row;
  // Bitwise: the metadata floats are bit-copied integers, some of them NaNs.
  bool operator==(const StoredRow& other) const {
    return key == other.key && row.size() == other.row.size() &&
           std::memcmp(row.data(), other.row.data(), row.size() * sizeof(float)) == 0;
  }
};

// Every stored row, sorted by key; fails the test if a key comes twice.
inline std::vector<StoredRow> SortedRows(EmbeddingTable& table) {
  std::vector<StoredRow> rows;
  embedding::StoredRows& stored = table.stored_rows();
  const int64_t floats = stored.row_floats();
  EXPECT_TRUE(stored
                  .Scan([&](Key key, const float* row) {
                    rows.push_back({key, std::vector<float>(row, row + floats)});
                    return Status::OK();
                  })
                  .ok());
  std::sort(rows.begin(), rows.end(),
            [](const StoredRow& a, const StoredRow& b) { return a.key < b.key; });
  for (size_t i = 1; i < rows.size(); ++i) {
    EXPECT_NE(rows[i - 1].key, rows[i].key) << "Scan visited a key twice";
  }
  return rows;
}

inline std::vector<Key> KeysOf(const std::vector<StoredRow>& rows) {
  std::vector<Key> keys;
  for (const StoredRow& row : rows) keys.push_back(row.key);
  return keys;
}

}  // namespace ember::test
