#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/json_fwd.h"
#include "core/status.h"

namespace ember::embedding {

using Key = uint64_t;

// kRowWiseAdagrad: Adagrad with one accumulator per row (the mean of the
// squared gradient over the row), as FBGEMM's and TorchRec's row-wise Adagrad.
enum class SparseOptimizer { kSgd, kAdagrad, kAdam, kFtrl, kRowWiseAdagrad };

// Parses "sgd", "adagrad", "adam", "ftrl" or "rowwise_adagrad".
Result<SparseOptimizer> ParseSparseOptimizer(const std::string& name);
const char* SparseOptimizerName(SparseOptimizer optimizer);

// How rows hold their weights, in memory and on disk: kFloat32, or
// kBFloat16, 16 bits each (the high half of a float) with float arithmetic
// and stochastic rounding of updates (embedding/internal/row_weights.h).
// bfloat16 halves the weights' bytes, so a memory budget holds more rows;
// it changes the model (by rounding), not what StoredRows shows: rows read
// and written there are floats.
enum class WeightStorage { kFloat32, kBFloat16 };

// Parses "f32" or "bf16".
Result<WeightStorage> ParseWeightStorage(const std::string& name);

// Hyper-parameters of the sparse optimizers; the update rules are in
// embedding/sparse_optimizer.h. Each optimizer reads only its own fields.
struct SparseOptimizerOptions {
  SparseOptimizer type = SparseOptimizer::kAdagrad;
  // Step size; FTRL's alpha. Default: 0.05, which suits Adagrad on CTR data.
  float learning_rate = 0.05f;
  // Adagrad, row-wise Adagrad and FTRL: initial value of the squared-gradient
  // accumulator (FTRL's n). Default: 0.
  float initial_accumulator = 0.0f;
  // Adagrad (both forms) and Adam: added to the root of the (bias-corrected)
  // second moment. Default: 1e-8. Adam requires it > 0.
  float epsilon = 1e-8f;
  // Adam: decay rates of the first and second moment estimates, in [0, 1).
  // Defaults: 0.9 and 0.999 (Kingma & Ba).
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  // FTRL-Proximal: the beta of the per-coordinate learning rate
  // alpha / (beta + sqrt(n)), >= 0. Default: 1.
  float ftrl_beta = 1.0f;
  // FTRL-Proximal: L1 and L2 regularisation strengths, >= 0. L1 > 0 makes
  // weights exactly zero. Defaults: 0.
  float l1 = 0.0f;
  float l2 = 0.0f;
};

// Which keys get a row. A key that is not admitted has no row: Pull reads it
// as zeros and Push drops its gradient. Decisions depend only on the table's
// seed, the key, its history of Pulls and the step, so they are the same for
// any thread count.
struct AdmissionOptions {
  enum class Kind {
    // Every key gets a row on first sight.
    kNone,
    // A key gets a row at the Pull that brings its estimated count of Pulls
    // (a count-min sketch, see embedding/internal/count_min_sketch.h) to
    // min_count.
    kFrequency,
    // At each Pull of a key without a row, the key is admitted with
    // probability `probability`, decided by a hash of (seed, key, step): a key
    // seen in k distinct steps has probability 1 - (1 - p)^k of a row.
    kProbability,
  };
  Kind kind = Kind::kNone;
  // kFrequency: Pulls before a key is admitted, >= 1. Default: 2.
  int64_t min_count = 2;
  // kFrequency: counters per hash row of the sketch over the whole table (the
  // shards split them), in [1, 2^32]. Default: 2^20, i.e. 4 MiB per row.
  int64_t sketch_width = int64_t{1} << 20;
  // kFrequency: hash rows of the sketch, in [1, 16]. Default: 4.
  int sketch_depth = 4;
  // kProbability: admission probability per step, in (0, 1]. Default: 1.
  double probability = 1.0;
  // Only a Pull is an occurrence. A Push of a key without a row creates one
  // under kNone, and under kFrequency if the key's estimate has reached
  // min_count (its row was evicted, say); otherwise the gradient is dropped.
};

// What a table holds and has done since it was made.
struct TableStats {
  int64_t rows = 0;
  // As EmbeddingTable::memory_bytes().
  int64_t memory_bytes = 0;
  // Rows created (a key evicted and created again counts twice).
  int64_t admitted_keys = 0;
  // Keys a Pull read as zeros because they were not admitted, once per Pull.
  int64_t rejected_keys = 0;
  // Keys whose gradient a Push dropped because they were not admitted.
  int64_t dropped_gradients = 0;
  // Rows removed by EvictExpired.
  int64_t evicted_rows = 0;
  // Pulls that found their keys grouped ahead by PrepareKeys.
  int64_t prepared_pulls = 0;
  // Bytes of the per-batch buffers the table keeps between calls (keys
  // grouped by shard, batches kept for their Pull or Push, disk I/O
  // buffers): outside memory_bytes and the budget. They grow with the
  // batch (its distinct keys), not with the table. Buffers a call holds
  // while it runs are not counted.
  int64_t scratch_bytes = 0;

  // A table sharded over ranks (embedding/sharded_table.h; zero otherwise):
  // bytes this rank sent other ranks (keys, rows, gradients and the counts
  // of each exchange), and the least any exchange could send for the same
  // steps: each key this rank pulls from another rank out once (8 bytes), its
  // row back (4 x dim) and its gradient out (4 x dim), and the rows other
  // ranks pull from this one back to them.
  int64_t exchanged_bytes = 0;
  int64_t exchanged_bytes_minimum = 0;

  // Tiers (all zero without a disk tier).
  int64_t memory_rows = 0;       // Rows held in the memory tier.
  int64_t disk_rows = 0;         // Rows held only in the disk tier (approximate).
  int64_t memory_hits = 0;       // Pulled/pushed keys found in memory.
  int64_t disk_hits = 0;         // ... read back from the disk tier.
  int64_t prefetched_rows = 0;   // Rows Prefetch() brought into memory.
  int64_t spilled_rows = 0;      // Rows written back to disk to stay within budget.
  int64_t disk_reads = 0;        // Rows read from the disk tier, in total.
  int64_t disk_writes = 0;       // Rows written to the disk tier, in total.
};

// Bookkeeping of one row, next to its weights and optimizer state.
struct RowMeta {
  // Pulls that included the key since its row was created (saturates at
  // 2^32 - 1). Keys are distinct within a Pull, so this is the number of
  // batches that looked the row up.
  int64_t frequency = 0;
  // The table's step() at the last Pull that included the key, or at the
  // row's creation if no Pull has included it since.
  int64_t last_seen_step = 0;
  bool operator==(const RowMeta&) const = default;
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
  // How weights are held (see WeightStorage). Default: kFloat32.
  WeightStorage weight_storage = WeightStorage::kFloat32;
  // Default: every key gets a row.
  AdmissionOptions admission;
  // EvictExpired() removes rows not pulled for more than ttl_steps steps;
  // 0 keeps rows forever. Default: 0.
  int64_t ttl_steps = 0;

  // Bytes the memory tier may hold, counting everything it keeps (vectors,
  // optimizer state, metadata, index, eviction bookkeeping). Rows beyond it
  // are written back to a RocksDB tier in `disk_path`. 0: no limit and no
  // disk tier (the default).
  int64_t memory_budget_bytes = 0;
  enum class EvictionPolicy { kLru, kLfu };
  // Which rows leave memory first when over budget. `ember train` picks
  // kLfu unless told otherwise (--embedding_eviction): on skewed keys it
  // keeps more of the hot rows (DLRM at a 10% budget: 24% fewer disk reads
  // per example than kLru, 16-18% more samples/s).
  EvictionPolicy eviction_policy = EvictionPolicy::kLru;
  // Directory of the disk tier; required when memory_budget_bytes > 0. The
  // table creates it and does not remove it. A new table starts empty: the
  // rows of an earlier table's tier there are deleted (a directory holding
  // another kind of database is refused, untouched).
  std::string disk_path;
  // RocksDB memory of the disk tier, outside memory_budget_bytes: its block
  // cache, and two write buffers (memtables) of disk_write_buffer_bytes each.
  // Together they are the tier's fixed overhead. Defaults: 8 MiB and 16 MiB
  // (16 MiB memtables: DLRM at a 10% budget, 600k examples, 2 threads, 8%
  // more samples/s and 11% less CPU than 4 MiB; fewer flushes and L0 files).
  int64_t disk_block_cache_bytes = int64_t{8} << 20;
  int64_t disk_write_buffer_bytes = int64_t{16} << 20;
  // Background threads that load Prefetch()ed rows from the disk tier, each
  // for its own subset of the shards, in [1, 64]; unused without a disk tier.
  // They run outside the caller's arena: count them in the machine's thread
  // budget. Default: 2.
  int prefetch_threads = 2;
  // Keep the keys changed and removed since the last StoredRows::TakeChanges
  // (for delta checkpoints): 8 bytes per such key, outside memory_budget_bytes. Off by
  // default, so that a table nobody checkpoints does not grow a list.
  bool track_changes = false;
};

// Parses "lru" or "lfu"; InvalidArgument naming `name` otherwise.
Result<EmbeddingTableOptions::EvictionPolicy> ParseEvictionPolicy(const std::string& name);

// The options as JSON (core/json.h): every field but where the table lives
// and what it tracks for checkpoints (disk_path, track_changes), which
// belong to a run, not to the table; enums by name ("adagrad", "bf16",
// "frequency", "lfu"). from_json is strict: a missing or unknown field is an
// error naming it.
void to_json(Json& j, const EmbeddingTableOptions& options);
void from_json(const Json& j, EmbeddingTableOptions& options);
void to_json(Json& j, const SparseOptimizerOptions& options);
void from_json(const Json& j, SparseOptimizerOptions& options);
void to_json(Json& j, const AdmissionOptions& options);
void from_json(const Json& j, AdmissionOptions& options);

class StoredRows;

// An unbounded embedding table: 64-bit key -> row (vector, optimizer state
// and RowMeta), as a training step uses it. A row is created the first time
// its key is pulled (once admitted, see AdmissionOptions), with a value that
// depends only on (seed, key), never on thread count or order; a key whose
// row was evicted gets that same initial row again.
//
// This is the hot path: what the pipeline's stages call. Whole stored rows
// (checkpoints, exports, inspection) are behind stored_rows(), so that a
// table wrapping another (a key-sharded table over ranks, a fault-injecting
// test table) implements the step's methods and hands out the wrapped
// table's stored rows.
//
// Steps: the table keeps a current step, set by the caller with set_step()
// (e.g. to the index of the batch about to be pulled). Pulls stamp it on the
// rows they read; TTL eviction and probability admission use it. Only Pull
// updates RowMeta, not Push: in a pipeline the pull stage runs in batch order
// while pushes lag behind, so stamping from Pull alone keeps eviction
// reproducible. For the same reason, call set_step and EvictExpired from the
// thread that calls Pull, between Pulls, and choose ttl_steps larger than the
// pipeline's depth (a row evicted between its Pull and its Push is created
// afresh by the Push).
//
// Thread safety: all methods may be called concurrently; calls touching the
// same key are serialised per shard, and the result of racing Pull/Push on one
// key is one of the two orders. stored_rows() says what may run beside it.
class EmbeddingTable {
 public:
  virtual ~EmbeddingTable() = default;

  // Copies the rows of `keys` into `out` (keys.size() x dim floats), creating
  // rows for keys never seen once they are admitted; keys not admitted read as
  // zeros. Counts the Pull in each row's RowMeta and stamps step() on it.
  // Parallel over shards in the caller's arena. InvalidArgument if `out` is
  // null for a non-empty `keys`.
  // REQUIRES: keys are distinct; out has room for keys.size() * dim() floats.
  virtual Status Pull(const std::vector<Key>& keys, float* out) = 0;

  // Applies the sparse optimizer to the rows of `keys` with `grads`
  // (keys.size() x dim floats, one summed gradient per key). Keys without a
  // row are created first if they are admitted (without counting as a Pull);
  // the gradients of the others are dropped. Leaves RowMeta as it was.
  // InvalidArgument if `grads` is null for a non-empty `keys`.
  // REQUIRES: keys are distinct.
  virtual Status Push(const std::vector<Key>& keys, const float* grads) = 0;

  // Copies the rows of `keys` into `out` (keys.size() x dim floats) for
  // evaluation and serving: creates no row and changes no state (no
  // metadata, no admission counts). A key without a row reads as the row it
  // would get on creation (its (seed, key) initial value), or as zeros when
  // admission is on (as a Pull of a key not yet admitted does).
  // REQUIRES: out has room for keys.size() * dim() floats.
  virtual Status Lookup(const std::vector<Key>& keys, float* out) = 0;

  // Sets the step that later Pulls stamp on rows and EvictExpired measures
  // ages against. Steps are expected not to decrease. Default: 0.
  virtual void set_step(int64_t step) = 0;
  virtual int64_t step() const = 0;

  // Removes every row with step() - last_seen_step > ttl_steps and returns
  // how many it removed now; returns 0 when ttl_steps is 0. Releases their
  // memory (the remaining rows are compacted). A table with a disk tier
  // removes the expired rows that tier holds when it next reads them (see
  // embedding/tiered_table.h): they read as absent from this call on, and
  // count in stats().evicted_rows once removed. A pass over all rows in
  // memory: call it every few hundred steps, not every step.
  virtual int64_t EvictExpired() = 0;

  virtual int dim() const = 0;
  // Rows held, in every tier.
  virtual int64_t num_rows() const = 0;
  // Bytes held by rows, optimizer state, row metadata, index and admission
  // sketch.
  virtual int64_t memory_bytes() const = 0;
  // A consistent view of each shard; shards are read one after another.
  virtual TableStats stats() const = 0;

  // --- Tiers --------------------------------------------------------------
  // Starts loading the rows of `keys` that live in a disk tier into memory,
  // in the background, so that a later Pull finds them there. A hint: changes
  // no value and no metadata, and does nothing in a table without a disk
  // tier. Once a Pull of the same keys (in any order) begins, what is not
  // loaded yet is left to it. Errors surface in the next Pull or Push.
  virtual void Prefetch(const std::vector<Key>& keys) = 0;

  // --- Read-ahead -------------------------------------------------------------
  // Does the key-only work of a later Pull of this very array (the same
  // address, size and keys) now, so that the Pull skips it: for a caller
  // that reads the next batch while the current one trains. A hint: a Pull
  // whose keys were not prepared, or changed since, does that work itself,
  // with the same result. Changes no row. May run concurrently with Pull
  // and Push of other keys.
  virtual void PrepareKeys(const std::vector<Key>& keys) = 0;

  // --- Capacity ---------------------------------------------------------------
  // Makes room now for `rows` rows in all (the rows it holds count), so that
  // creating them later neither faults in memory nor grows the key index
  // inside a training step: for a caller that knows about how many distinct
  // keys its data has. The room counts in memory_bytes() from now on and
  // stays with the table when rows are removed. A hint: rows beyond it are
  // made as without it, and a table with a disk tier (which keeps to its
  // budget) makes no room. ResourceExhausted when the memory is more than
  // the machine has available (AvailableMemoryBytes): nothing is reserved;
  // or when an allocation fails: part of the room may be made. Rows are
  // unchanged either way. InvalidArgument for rows < 0. May run
  // concurrently with Pull and Push.
  virtual Status Reserve(int64_t rows) = 0;

  // --- Stored rows ------------------------------------------------------------
  // The table's stored rows (embedding/stored_rows.h), for checkpoints,
  // exports and inspection; it lives as long as the table. Its methods (but
  // row_meta) REQUIRE that no method of this table runs meanwhile.
  virtual StoredRows& stored_rows() = 0;
};

// An in-memory table: a memory tier without a budget and nothing behind it
// (see embedding/tiered_table.h for one with a budget in front of a disk
// tier). Fails with InvalidArgument naming the field on invalid
// options: dim outside [1, 2^20], num_shards outside [1, 2^16], a non-finite
// init_scale, ttl_steps < 0, admission options outside their documented
// ranges, or optimizer options that ValidateSparseOptimizerOptions
// (embedding/sparse_optimizer.h) rejects (learning_rate <= 0, ...).
// Its Pull and Push return ResourceExhausted if memory runs out while rows
// are created; rows created before that stay valid.
// memory_budget_bytes must be 0: a table with a disk tier is made by
// NewEmbeddingTable.
Result<std::unique_ptr<EmbeddingTable>> NewMemoryTable(const EmbeddingTableOptions& options);

// The table `options` describe: in memory when memory_budget_bytes is 0,
// otherwise a memory tier of that budget in front of a RocksDB tier at
// disk_path (see embedding/tiered_table.h). Fails with InvalidArgument as
// NewMemoryTable does, and when memory_budget_bytes < 0, when it is > 0
// without a disk_path, or when it is below one row per shard (the message
// names the minimum); with IOError if the disk tier cannot be opened.
Result<std::unique_ptr<EmbeddingTable>> NewEmbeddingTable(const EmbeddingTableOptions& options);

}  // namespace ember::embedding
