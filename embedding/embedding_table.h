#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace ember::embedding {

using Key = uint64_t;

enum class SparseOptimizer { kSgd, kAdagrad };

// Parses "sgd" or "adagrad".
Result<SparseOptimizer> ParseSparseOptimizer(const std::string& name);
const char* SparseOptimizerName(SparseOptimizer optimizer);

struct SparseOptimizerOptions {
  SparseOptimizer type = SparseOptimizer::kAdagrad;
  // Step size. Default suits Adagrad on CTR data.
  float learning_rate = 0.05f;
  // Adagrad: initial value of the per-element squared-gradient accumulator.
  float initial_accumulator = 0.0f;
  // Adagrad: added to the root of the accumulator.
  float epsilon = 1e-8f;
};

struct EmbeddingTableOptions {
  // Floats per row.
  int dim = 16;
  // Independent shards (hash of the key picks one); more shards, less contention.
  int num_shards = 64;
  // New rows are drawn uniformly from [-init_scale, init_scale] as a pure
  // function of (seed, key). init_scale <= 0 means 1/sqrt(dim).
  float init_scale = 0.0f;
  uint64_t seed = 0;
  SparseOptimizerOptions optimizer;
};

// An unbounded in-memory embedding table: 64-bit key -> row (vector and
// optimizer state). A row is created the first time its key is pulled, with a
// value that depends only on (seed, key), never on thread count or order.
// Thread safety: Pull and Push may be called concurrently; calls touching the
// same key are serialised per shard, and the result of racing Pull/Push on one
// key is one of the two orders.
class EmbeddingTable {
 public:
  virtual ~EmbeddingTable() = default;

  // Copies the rows of `keys` into `out` (keys.size() x dim floats), creating
  // rows for keys never seen. Parallel over shards in the caller's arena.
  // REQUIRES: keys are distinct; out has room for keys.size() * dim() floats.
  virtual Status Pull(const std::vector<Key>& keys, float* out) = 0;

  // Applies the sparse optimizer to the rows of `keys` with `grads`
  // (keys.size() x dim floats, one summed gradient per key). Keys without a
  // row are created first (as Pull would).
  // REQUIRES: keys are distinct.
  virtual Status Push(const std::vector<Key>& keys, const float* grads) = 0;

  virtual int dim() const = 0;
  virtual int64_t num_rows() const = 0;
  // Bytes held by rows, optimizer state and index.
  virtual int64_t memory_bytes() const = 0;
};

// An in-memory table. Fails with InvalidArgument naming the field on invalid
// options: dim outside [1, 2^20], num_shards outside [1, 2^16], a non-finite
// init_scale, or optimizer options that ValidateSparseOptimizerOptions
// (embedding/sparse_optimizer.h) rejects (learning_rate <= 0, ...).
// Its Pull and Push return ResourceExhausted if memory runs out while rows
// are created; rows created before that stay valid.
Result<std::unique_ptr<EmbeddingTable>> NewMemoryTable(const EmbeddingTableOptions& options);

}  // namespace ember::embedding
