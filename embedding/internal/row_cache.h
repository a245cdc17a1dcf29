#pragma once

// The memory level of an embedding table, its row cache: rows in memory,
// sharded by key hash, with creation, admission, change tracking, TTL and,
// with a budget, the choice of rows to evict. It is not a Tier (embedding/
// tier.h): it does no I/O and knows nothing of what is behind it; a Tier is
// the store a table may put behind it. CachedTable (cached_table.h) is made
// of it: alone, without a budget (NewMemoryTable), or with a budget in front
// of a Tier (RocksDB on disk, NewTieredTable), loading the rows the cache
// lacks and writing back the rows the cache evicts.
//
// A table works on it shard by shard: ForEachShard runs a function per shard
// of a batch (grouped by BatchScratchPool), which locks the shard and calls
// the per-shard operations below; a table with a tier behind calls that
// tier under the same lock, so that a key's row is in exactly one place
// whenever the lock is free. See memory_shard.h for a shard's layout and
// memory_budget.h for eviction.
//
// Contract of the per-shard operations (REQUIRES(shard.mu), never fail
// except by std::bad_alloc, which ForEachShard turns into ResourceExhausted):
// * A row lives at a slot of its shard's arena; its address stays valid
//   until the next removal of a row of that shard (RowArena::removals()).
// * New rows start at their (seed, key) initial value with RowMeta
//   {0, step}; InsertRow copies a stored row as it is (a row read back).
// * Every change a checkpoint must see (a row created, updated by Push or
//   written, or removed) is recorded for TakeChanges when the options ask
//   for change tracking, through MarkChanged, RecordChanged and
//   RecordRemoved; loading or evicting a row is not a change.

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/mutex.h"
#include "core/status.h"
#include "core/threads.h"
#include "embedding/embedding_table.h"
#include "embedding/internal/batch_scratch.h"
#include "embedding/internal/memory_budget.h"
#include "embedding/internal/memory_shard.h"
#include "embedding/internal/row_store.h"
#include "embedding/stored_rows.h"

namespace ember::embedding::internal {

// Below this many keys a batch runs on the calling thread: scheduling tasks
// for mostly empty shards costs more than it saves.
constexpr int64_t kMinKeysForParallel = 2048;

// Whether rows are resolved for a Pull (an occurrence for admission), a Push,
// or a Prefetch (which only loads rows from the tier behind).
enum class Access { kPull, kPush, kPrefetch };

struct RowCacheOptions {
  // The table's options: row layout (dim, optimizer), shards, seed,
  // admission, TTL and change tracking. memory_budget_bytes > 0 gives the
  // cache a budget, split evenly between the shards after overhead_bytes,
  // and eviction_policy orders its victims; 0: no budget, and rows come
  // from a ChunkPool that Reserve fills.
  EmbeddingTableOptions table;
  // Bytes of the table outside the shards (its own object): counted in
  // memory_bytes() and taken off the budget.
  int64_t overhead_bytes = 0;
  // Rows per batched call to the tier behind; 0: nothing behind. With a tier
  // behind, batch scratch carries a ShardIo per shard whose row buffers
  // beyond two such calls are freed between batches.
  int64_t io_chunk_rows = 0;
};

// Thread safety: the per-shard operations REQUIRE the shard's mutex; the
// others lock what they touch and may be called concurrently, except those
// marked otherwise.
class RowCache {
 public:
  // May throw std::bad_alloc. REQUIRES: options.table passed the table's
  // validation (see table_options.h).
  explicit RowCache(const RowCacheOptions& options);
  RowCache(const RowCache&) = delete;
  RowCache& operator=(const RowCache&) = delete;

  // Floats (32-bit words) of a row as memory and the tier behind hold it:
  // weights in options.weight_storage, optimizer state, RowMeta.
  static int64_t RowFloats(const EmbeddingTableOptions& options);
  // Floats of a row as StoredRows shows it: dim float weights, state, RowMeta.
  static int64_t StoredRowFloats(const EmbeddingTableOptions& options);
  // Bytes of one shard's fixed parts and one row under a budget: the least
  // budget a shard can keep to.
  static int64_t MinShardBytes(const EmbeddingTableOptions& options);

  // --- Layout and state ---------------------------------------------------
  const EmbeddingTableOptions& options() const { return options_; }
  int dim() const { return dim_; }
  int num_shards() const { return num_shards_; }
  // A held row (RowFloats) and a stored one (StoredRowFloats): they differ
  // in their weights' words only, under bfloat16 storage.
  int64_t row_floats() const { return row_floats_; }
  int64_t stored_row_floats() const { return stored_row_floats_; }
  // Floats before a held row's RowMeta: weights and optimizer state.
  int64_t meta_offset() const { return meta_offset_; }
  // The float weights of held row `row` into `out` (dim() floats).
  void LoadRowWeights(const float* row, float* out) const;
  // A held row as StoredRows shows it, into `stored` (stored_row_floats()),
  // and back (weights rounded to nearest for bfloat16: exact for a row
  // ExpandRow made). A held row may be bytes at a multiple of 4 (a disk
  // row in a buffer); they must not overlap.
  void ExpandRow(const float* row, float* stored) const;
  void CompactRow(const float* stored, float* row) const;
  Shard& shard(int s) const { return *shards_[s]; }
  int ShardOf(uint64_t hash) const {
    return static_cast<int>(hash % static_cast<uint64_t>(num_shards_));
  }
  BatchScratchPool& batches() const { return batches_; }
  const MemoryBudget& budget() const { return budget_; }

  // Relaxed: the step is a value handed from the caller to later calls on
  // the same thread (see EmbeddingTable); it orders no other memory.
  void set_step(int64_t step) { step_.store(step, std::memory_order_relaxed); }
  int64_t step() const { return step_.load(std::memory_order_relaxed); }
  // The step of the last EvictExpiredAt, or INT64_MIN if there was none.
  // Written before EvictExpiredAt locks any shard, so a reader holding a
  // shard's lock after that shard was swept sees it.
  int64_t last_eviction_step() const { return last_evict_step_.load(std::memory_order_relaxed); }

  // --- Batches ------------------------------------------------------------
  // Calls shard_fn(s) for every shard with keys in `batch`, in parallel in
  // the caller's arena when the batch is large enough, and returns the first
  // error of a shard (in shard order). Returns ResourceExhausted if memory
  // runs out; rows created before that stay valid.
  template <typename ShardFn>
  Status ForEachShard(BatchScratch& batch, const ShardFn& shard_fn) const;

  // Calls in_memory(k, slot) for each key k (an index into `batch`) of shard
  // s that memory holds, and not_held(k) for the others, in batch order.
  template <typename InMemory, typename NotHeld>
  void SplitByResidence(const Shard& shard, int s, const BatchScratch& batch,
                        const InMemory& in_memory, const NotHeld& not_held) const
      REQUIRES(shard.mu);

  // --- Per-shard operations -------------------------------------------------
  // Resolves the keys of shard s in `batch` to rows (batch.rows), creating
  // the rows of keys memory lacks that are admitted (null for the others):
  // the whole of it for a table with nothing behind.
  void ResolveRows(Shard& shard, int s, Access access, int64_t step, BatchScratch& batch) const
      REQUIRES(shard.mu);
  // Points batch.rows at the rows of shard s's keys that memory holds
  // (marking them used for the eviction policy) and lists the others in
  // `missing` (keys, and their batch indices as positions), batch.rows null.
  void FindResident(Shard& shard, int s, BatchScratch& batch, ShardIo& missing) const
      REQUIRES(shard.mu);
  // Creates the row of `key`, which memory lacks, if admission lets it in;
  // returns its slot, or -1 (counted as rejected for a Pull, dropped for a
  // Push).
  int64_t CreateIfAdmitted(Shard& shard, Key key, uint64_t hash, Access access, int64_t step) const
      REQUIRES(shard.mu);
  // Appends a copy of held row `row` (row_floats() floats, any alignment)
  // for `key`, which memory lacks; returns its slot. Not a change. May throw
  // std::bad_alloc, leaving the shard as it was.
  int64_t InsertRow(Shard& shard, Key key, uint64_t hash, const float* row) const
      REQUIRES(shard.mu);
  // Removes the row at `slot` (index, policy, arena). Not recorded as a
  // change: the caller records removals it reports (RecordRemoved).
  void RemoveSlot(Shard& shard, int64_t slot) const REQUIRES(shard.mu);
  // Writes stored row `row` (stored_row_floats() floats, as StoredRows
  // shows it) as `key`'s: over the row at `slot`, or as a new
  // row (InsertRow) when slot is -1. The key in its RowMeta becomes `key`,
  // whatever `row` says. A change.
  void WriteRow(Shard& shard, int64_t slot, Key key, uint64_t hash, const float* row) const
      REQUIRES(shard.mu);
  // Records that `row` (in shard's arena) changed.
  void MarkChanged(Shard& shard, float* row) const REQUIRES(shard.mu);
  // Records keys changed / removed outside memory (rows of the tier behind).
  void RecordChanged(Shard& shard, const std::vector<Key>& keys) const REQUIRES(shard.mu);
  void RecordRemoved(Shard& shard, const std::vector<Key>& keys) const REQUIRES(shard.mu);
  void RecordRemoved(Shard& shard, Key key) const REQUIRES(shard.mu);
  // A Pull's copy: the weights of shard s's resolved rows into `out` (zeros
  // for keys without a row), each row's RowMeta touched at `step`; notes in
  // batch.all_rows / batch.removals whether a Push may reuse the rows.
  void CopyOut(Shard& shard, int s, BatchScratch& batch, int64_t step, float* out) const
      REQUIRES(shard.mu);
  // A Push's update: the sparse optimizer on shard s's resolved rows with
  // `grads` (keys without a row are skipped); marks them changed.
  void ApplyGradients(Shard& shard, int s, const BatchScratch& batch, const float* grads) const
      REQUIRES(shard.mu);
  // The RowMeta of `key` if memory holds its row.
  std::optional<RowMeta> ResidentMeta(const Shard& shard, Key key, uint64_t hash) const
      REQUIRES(shard.mu);

  // What a key without a row reads as in a Lookup: its initial weights (in
  // the weight storage's precision), or zeros under admission.
  // REQUIRES: dst has room for dim() floats.
  void ReadAbsent(Key key, float* dst) const;

  // --- The whole cache ------------------------------------------------------
  // Removes every memory row with step - last_seen_step > ttl_steps (after
  // noting `step` as last_eviction_step()); with `on_expired`, calls it under
  // each shard's lock with the keys it removed there. Returns how many; 0
  // without TTL (and notes nothing).
  using ExpiredFn = std::function<void(Shard& shard, const std::vector<Key>& keys)>;
  int64_t EvictExpiredAt(int64_t step, const ExpiredFn& on_expired);

  // Rows held in memory.
  int64_t num_rows() const;
  int64_t memory_bytes() const;
  // The stats outside the shards (memory_bytes of the overhead and reserved
  // room, prepared_pulls); AddShardStats adds one shard's rows, bytes and
  // counters, so that a caller adding its own reads each shard once.
  TableStats BaseStats() const;
  void AddShardStats(const Shard& shard, TableStats* stats) const REQUIRES(shard.mu);
  // EmbeddingTable::Reserve for a cache without a budget; OK and nothing
  // done with a budget.
  Status Reserve(int64_t rows);

  // --- Stored rows (REQUIRE what StoredRows requires) -------------------------
  // Visits every row memory holds, as stored rows.
  Status ScanResident(const RowVisitor& visit) const;
  Status SaveAdmissionState(std::string* out) const;
  Status RestoreAdmissionState(std::string_view state);
  // StoredRows::TakeChanges. A key both changed and removed since the last
  // call is reported by what it is now: changed if it has a row, removed if
  // not. `gone` decides for those of a shard's such keys that memory lacks:
  // called under the shard's lock, it appends those that have no row in the
  // tier behind either to `*gone` (in their order). Without it they are gone.
  using GoneFn =
      std::function<void(Shard& shard, const std::vector<Key>& keys, std::vector<Key>* gone)>;
  void TakeChanges(std::vector<Key>* changed, std::vector<Key>* removed, const GoneFn& gone);

 private:
  bool Admit(Shard& shard, Key key, Access access, int64_t step) const REQUIRES(shard.mu);
  // Creates the row of `key`; returns its slot. May throw std::bad_alloc.
  int64_t CreateRow(Shard& shard, Key key, uint64_t hash, int64_t step) const REQUIRES(shard.mu);
  int64_t EvictShard(Shard& shard, int64_t step, const ExpiredFn& on_expired) const;

  const EmbeddingTableOptions options_;
  const int dim_;
  const int num_shards_;
  // Words of a held row's weights (dim, or half that for bfloat16).
  const int64_t weight_words_;
  const int64_t meta_offset_;
  const int64_t row_floats_;
  const int64_t stored_row_floats_;
  // Floats per row in the arena: row_floats_, epoch, policy links.
  const int64_t stride_floats_;
  const float init_scale_;
  const uint64_t admission_seed_;
  const int64_t overhead_bytes_;
  const MemoryBudget budget_;
  // Chunks reserved for the shards' rows (Reserve); null with a budget.
  // Before shards_, which give their chunks back when destroyed.
  const std::unique_ptr<ChunkPool> chunk_pool_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::atomic<int64_t> step_{0};
  // See last_eviction_step(). Read under a shard's lock after EvictExpiredAt
  // wrote it before locking that shard, so the shard mutex orders it;
  // relaxed suffices.
  std::atomic<int64_t> last_evict_step_{std::numeric_limits<int64_t>::min()};
  mutable BatchScratchPool batches_;
};

template <typename ShardFn>
inline Status RowCache::ForEachShard(BatchScratch& batch, const ShardFn& shard_fn) const {
  const int64_t n = batch.begin[num_shards_];
  bool failed = false;
  try {
    if (n < kMinKeysForParallel) {
      for (int s = 0; s < num_shards_; ++s) {
        if (batch.begin[s] < batch.begin[s + 1]) {
          batch.status[s] = shard_fn(s);
          failed |= !batch.status[s].ok();
        }
      }
    } else {
      std::atomic<bool> any_failed{false};
      ParallelFor(0, num_shards_, 1, [&](int64_t begin, int64_t end) {
        for (int64_t s = begin; s < end; ++s) {
          if (batch.begin[s] == batch.begin[s + 1]) continue;
          batch.status[s] = shard_fn(static_cast<int>(s));
          // Relaxed: ParallelFor's join orders the write before the read.
          if (!batch.status[s].ok()) any_failed.store(true, std::memory_order_relaxed);
        }
      });
      failed = any_failed.load(std::memory_order_relaxed);
    }
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("embedding table: out of memory creating rows (", num_rows(),
                                     " rows in memory, ", memory_bytes(), " bytes held)");
  }
  if (!failed) return Status::OK();
  Status first;
  for (int s = 0; s < num_shards_; ++s) {
    if (first.ok() && !batch.status[s].ok()) first = batch.status[s];
    batch.status[s] = Status::OK();
  }
  return first;
}

template <typename InMemory, typename NotHeld>
inline void RowCache::SplitByResidence(const Shard& shard, int s, const BatchScratch& batch,
                                         const InMemory& in_memory, const NotHeld& not_held) const {
  const int64_t end = batch.begin[s + 1];
  for (int64_t k = batch.begin[s]; k < end; ++k) {
    const int64_t slot = shard.index.Find(batch.keys[k], batch.hashes[k]);
    if (slot >= 0) {
      in_memory(k, slot);
    } else {
      not_held(k);
    }
  }
}

}  // namespace ember::embedding::internal
