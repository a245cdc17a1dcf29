#pragma once

// The implementation of NewMemoryTable and NewEmbeddingTable, shared by
// memory_table.cc (Pull, Push, TTL, stats, factories), tiered_shard.cc (the
// disk tier: loading, spilling, Prefetch) and table_snapshot.cc (Scan,
// ReadRows, WriteRows, EraseRows, TakeChanges).
//
// Keys are spread over shards by Mix64(key) % num_shards. A shard is a mutex,
// a flat open-addressing index (key -> slot, linear probing), an arena of
// rows in fixed-size chunks, so that growing never moves a row, and, with
// frequency admission, its own count-min sketch (the shard's keys are the
// only ones it counts, and it is updated under the shard's lock in batch
// order, so its counts do not depend on thread count). A row in the arena is
//
//   [dim weights][optimizer state][key: 2][last_seen_step: 2][frequency: 1]
//   [change epoch: 1][LRU links: 2, kLru with a disk tier only]
//
// floats. The first row_floats() of them are the stored row (what Scan shows
// and the disk tier holds); the rest is bookkeeping that stays in memory.
// RowMeta integers are bit-copied: metadata lives in the row, whose cache
// line Pull touches anyway, and the key lets eviction walk the arena and move
// rows. Removing a row fills its hole with the shard's last row, so slots
// stay dense and emptied chunks are freed.
//
// With a disk tier (memory_budget_bytes > 0) a key's row is its memory row
// if the shard's index holds the key, else its disk row. Loading a row leaves
// the disk copy in place, stale from then on (this saves a Delete per load);
// spilling overwrites it, and erasing or TTL-evicting a memory row deletes
// it. Every read (Scan, ReadRows, Lookup, row_meta) looks in memory first.
// See tiered_shard.cc.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "core/status.h"
#include "core/threads.h"
#include "embedding/embedding_table.h"
#include "embedding/internal/count_min_sketch.h"
#include "embedding/internal/eviction_policy.h"
#include "embedding/internal/row_store.h"
#include "embedding/tier.h"

namespace ember::embedding::internal {

// Below this many keys a batch runs on the calling thread: scheduling tasks
// for mostly empty shards costs more than it saves.
constexpr int64_t kMinKeysForParallel = 2048;

// Rows per batched disk read or write of a shard: large enough that RocksDB's
// per-call costs vanish, small enough that the row buffers each shard keeps
// between batches (outside the budget) stay a few tens of KiB.
constexpr int64_t kIoChunkRows = 128;

// Floats of RowMeta at the end of a stored row: key (2), last_seen_step (2),
// frequency (1).
constexpr int64_t kMetaFloats = 5;

// The RowMeta of a row, at `meta` = row + dim + state floats. Bit-copied so
// that no float arithmetic ever touches the integers.
struct StoredMeta {
  Key key;
  int64_t last_seen_step;
  uint32_t frequency;
};
static_assert(sizeof(Key) + sizeof(int64_t) + sizeof(uint32_t) == kMetaFloats * sizeof(float));

inline StoredMeta ReadMeta(const float* meta) {
  StoredMeta m;
  std::memcpy(&m.key, meta, sizeof(m.key));
  std::memcpy(&m.last_seen_step, meta + 2, sizeof(m.last_seen_step));
  std::memcpy(&m.frequency, meta + 4, sizeof(m.frequency));
  return m;
}

inline void WriteMeta(const StoredMeta& m, float* meta) {
  std::memcpy(meta, &m.key, sizeof(m.key));
  std::memcpy(meta + 2, &m.last_seen_step, sizeof(m.last_seen_step));
  std::memcpy(meta + 4, &m.frequency, sizeof(m.frequency));
}

// Counters of one shard, summed by stats().
struct ShardCounters {
  int64_t admitted = 0;
  int64_t rejected = 0;
  int64_t dropped = 0;
  int64_t evicted = 0;
  int64_t memory_hits = 0;
  int64_t disk_hits = 0;
  int64_t prefetched = 0;
  int64_t spilled = 0;
  int64_t disk_reads = 0;
  int64_t disk_writes = 0;
  // Keys whose row is on disk and not in memory (stale disk copies of memory
  // rows are not counted), counting rows that expired there but were not yet
  // looked at. Exact unless deleting a TTL-evicted row's copy failed.
  int64_t disk_rows = 0;
};

// A key whose row a Prefetch asked for, spared by eviction until the table's
// step passes `until_step` or a Pull reads the key.
struct PinnedKey {
  Key key;
  int64_t until_step;
};

// Thread safety: fields are guarded by mu. Aligned so that neighbouring
// shards' mutexes do not share a cache line.
struct alignas(64) Shard {
  Shard(int64_t stride_floats, int64_t chunk_bytes, ChunkPool* pool,
        std::unique_ptr<CountMinSketch> sketch, const EvictionPolicy& policy)
      : rows(stride_floats, chunk_bytes, pool), sketch(std::move(sketch)), policy(policy) {}

  mutable Mutex mu;
  KeyIndex index GUARDED_BY(mu);
  RowArena rows GUARDED_BY(mu);
  // Pulls of keys without a row; null unless admission is kFrequency.
  std::unique_ptr<CountMinSketch> sketch PT_GUARDED_BY(mu);
  EvictionPolicy policy GUARDED_BY(mu);
  // Rows whose epoch float equals `epoch` are in `changed` already. Starts
  // at 1 so that 0 means "not marked" (new and loaded rows).
  uint32_t epoch GUARDED_BY(mu) = 1;
  // Keys changed / removed since the last TakeChanges, possibly repeated.
  // Outside memory_bytes() and the budget: they are the checkpoints'
  // bookkeeping, 8 bytes per key whichever tier holds its row (at a 10%
  // budget, counting them would leave no room for rows between two
  // checkpoints).
  std::vector<Key> changed GUARDED_BY(mu);
  std::vector<Key> removed GUARDED_BY(mu);
  ShardCounters counters GUARDED_BY(mu);
  // Incremented by every write or delete of this shard's disk rows, so that
  // rows read from disk without the lock (Prefetch) can tell whether the
  // disk still holds what they read when they come back to insert them.
  int64_t disk_version GUARDED_BY(mu) = 0;
  // Keys of pending Prefetches, sorted by key, one entry per key (see
  // PinnedKey). Outside the budget: at most the keys of the queued and
  // running Prefetches of the last few steps, 16 bytes each.
  std::vector<PinnedKey> pinned GUARDED_BY(mu);
};

// Per-shard buffers for the disk tier, kept between batches.
struct ShardIo {
  std::vector<Key> keys;            // keys to read, write or delete
  std::vector<Key> chunk_keys;      // the keys of one chunk of disk I/O
  std::vector<int64_t> positions;   // where each of `keys` came from
  std::vector<int64_t> slots;       // slot of each of `keys` after loading, or -1
  std::vector<int64_t> absent;      // Tier::Get's missing indices
  std::vector<char> rows;           // rows read or to write
  std::vector<Key> loaded;          // keys loaded or expired: deleted from disk
};

// One batch's keys grouped by shard: the keys of shard s, their hashes and
// their positions in the caller's arrays are at [begin[s], begin[s + 1]).
// `rows` receives the resolved row of each grouped key (null: not admitted).
struct BatchScratch {
  std::vector<int64_t> begin;
  std::vector<uint32_t> shard_of;
  std::vector<Key> keys;
  std::vector<uint64_t> hashes;
  std::vector<int64_t> positions;
  std::vector<float*> rows;
  std::vector<Status> status;  // per shard
  std::vector<ShardIo> io;     // per shard; empty without a disk tier
  // For scratch kept for a later call with the same keys (MemoryTable::Keep):
  // the caller's key array it was grouped from, and a copy of its keys then
  // (compared in one sequential pass when it is taken).
  const Key* kept_keys = nullptr;
  std::vector<Key> kept_copy;
  // Set by a Pull of a table without a disk tier, for the Push of the same
  // keys: per shard whether every key had a row and the shard's
  // RowArena::removals() when they were resolved. The rows are still valid
  // while that count is unchanged.
  std::vector<char> all_rows;     // per shard
  std::vector<int64_t> removals;  // per shard
};

// One Prefetch call: its keys, and the step until which their rows are
// spared by eviction.
struct PrefetchRequest {
  std::vector<Key> keys;
  // The table's step when Prefetch was called.
  int64_t step = 0;
  int64_t pin_until_step = 0;
};

// A background thread that loads the Prefetch keys of the shards s with
// s % loaders == its index, from its own bounded queue of requests.
struct PrefetchLoader {
  std::deque<std::shared_ptr<const PrefetchRequest>> queue;
  bool busy = false;
  std::thread thread;
};

// Whether rows are resolved for a Pull (an occurrence for admission), a Push,
// or a Prefetch (which only loads rows from disk).
enum class Access { kPull, kPush, kPrefetch };

// Thread safety: all public methods may be called concurrently, except the
// snapshot methods (see EmbeddingTable). With a disk tier,
// options.prefetch_threads background threads owned by the table serve
// Prefetch, each for its own subset of the shards.
class MemoryTable final : public EmbeddingTable {
 public:
  // `disk` is null for a table without a disk tier.
  MemoryTable(const EmbeddingTableOptions& options, std::unique_ptr<Tier> disk);
  ~MemoryTable() override;
  MemoryTable(const MemoryTable&) = delete;
  MemoryTable& operator=(const MemoryTable&) = delete;

  Status Pull(const std::vector<Key>& keys, float* out) override;
  Status Push(const std::vector<Key>& keys, const float* grads) override;
  Status Lookup(const std::vector<Key>& keys, float* out) override;

  // Relaxed: the step is a value handed from the caller to later calls on
  // the same thread (see the class comment of EmbeddingTable); it orders no
  // other memory.
  void set_step(int64_t step) override { step_.store(step, std::memory_order_relaxed); }
  int64_t step() const override { return step_.load(std::memory_order_relaxed); }
  int64_t EvictExpired() override;
  int64_t eviction_step() const override;
  void RestoreEvictionStep(int64_t step) override;
  std::optional<RowMeta> row_meta(Key key) const override;

  int dim() const override { return dim_; }
  int64_t num_rows() const override;
  int64_t memory_bytes() const override;
  TableStats stats() const override;

  void Prefetch(const std::vector<Key>& keys) override;
  // Groups the keys by shard (the Pull's serial pass).
  void PrepareKeys(const std::vector<Key>& keys) override;
  // Row chunks in chunk_pool_, and each shard's index sized for its share.
  Status Reserve(int64_t rows) override;

  int64_t row_floats() const override { return row_floats_; }
  Status Scan(const RowVisitor& visit) override;
  Status ReadRows(const std::vector<Key>& keys, float* rows,
                  std::vector<int64_t>* missing) override;
  Status WriteRows(const std::vector<Key>& keys, const float* rows) override;
  Status EraseRows(const std::vector<Key>& keys) override;
  void TakeChanges(std::vector<Key>* changed, std::vector<Key>* removed) override;
  bool tracks_changes() const override { return options_.track_changes; }
  Status SaveAdmissionState(std::string* out) override;
  Status RestoreAdmissionState(std::string_view state) override;

  // Bytes of one shard's fixed parts and one row, for the minimum budget.
  static int64_t MinShardBytes(const EmbeddingTableOptions& options);
  // Bytes of the table outside its shards.
  static int64_t TableOverheadBytes(int num_shards);

 private:
  // --- memory_table.cc ---
  // Calls shard_fn(s) for every shard with keys in `batch`, in parallel when
  // the batch is large enough, and returns the first error of a shard (in
  // shard order). Returns ResourceExhausted if memory runs out; rows created
  // before that stay valid.
  template <typename ShardFn>
  Status ForEachShard(BatchScratch& batch, const ShardFn& shard_fn) const;
  // The keys of shard `s` in `batch` by where they live: calls
  // in_memory(k, slot) for each key k (an index into batch) with a row in
  // memory. With a disk tier the others are collected in batch.io[s] (keys,
  // and k as their positions) for one read from disk, and that ShardIo is
  // returned; without one not_held(k) is called for them and null returned.
  template <typename InMemory, typename NotHeld>
  ShardIo* SplitByTier(Shard& shard, int s, BatchScratch& batch, const InMemory& in_memory,
                       const NotHeld& not_held) const REQUIRES(shard.mu);
  // Resolves the keys of shard `s` in `batch` to rows into batch.rows,
  // reading rows from disk and creating the rows of missing keys that are
  // admitted (null for the others).
  Status ResolveRows(Shard& shard, int s, Access access, int64_t step, BatchScratch& batch) const
      REQUIRES(shard.mu);
  bool Admit(Shard& shard, Key key, Access access, int64_t step) const REQUIRES(shard.mu);
  // Creates the row of `key`; returns its slot. May throw std::bad_alloc.
  int64_t CreateRow(Shard& shard, Key key, uint64_t hash, int64_t step) const REQUIRES(shard.mu);
  // Appends a copy of stored row `row` (row_floats() floats) for `key`;
  // returns its slot. May throw std::bad_alloc, leaving the shard as it was.
  int64_t InsertRow(Shard& shard, Key key, uint64_t hash, const float* row) const
      REQUIRES(shard.mu);
  // Removes the row at `slot` from memory (index, policy, arena).
  void RemoveSlot(Shard& shard, int64_t slot) const REQUIRES(shard.mu);
  // Records that `row` (in shard's arena) changed.
  void MarkChanged(Shard& shard, float* row) const REQUIRES(shard.mu);
  int64_t EvictShard(Shard& shard, int64_t step) const;
  // EvictExpired as if step() were `step`.
  int64_t EvictExpiredAt(int64_t step);
  int64_t ShardBytes(const Shard& shard) const REQUIRES(shard.mu);
  Status TakePrefetchError();


  // --- batch_scratch.cc ---
  // Groups `keys` by shard into `batch` (one counting-sort pass).
  void Group(const std::vector<Key>& keys, BatchScratch& batch) const;
  std::unique_ptr<BatchScratch> TakeScratch();
  void ReturnScratch(std::unique_ptr<BatchScratch> scratch);
  // Scratch kept for a later call with the same key array: grouped by
  // PrepareKeys for a Pull, or a Pull's resolved rows for the Push.
  enum class Kept { kPrepared, kResolvedPull };
  // Keeps `scratch`, grouped from `keys`, as `kind`.
  void Keep(Kept kind, const std::vector<Key>& keys, std::unique_ptr<BatchScratch> scratch);
  // The scratch of `kind` kept for `keys`, with its grouping checked against
  // them (same array, same keys), or null.
  std::unique_ptr<BatchScratch> TakeKept(Kept kind, const std::vector<Key>& keys);
  std::vector<std::unique_ptr<BatchScratch>>& KeptList(Kept kind) REQUIRES(scratch_mu_);

  // --- tiered_shard.cc ---
  // Whether a row read from disk with `meta` was removed by TTL: it expired
  // at the last EvictExpired, which saw only memory rows.
  bool ExpiredOnDisk(const float* meta) const;
  // Reads io.keys from disk; loads each row that has not expired into memory
  // (io.slots[i]: its slot, or -1) and deletes the loaded and the expired
  // rows from disk. On error memory is as it was.
  Status LoadFromDisk(Shard& shard, Access access, ShardIo& io) const REQUIRES(shard.mu);
  // Spills the coldest rows to disk until the shard is within its budget
  // (one Put per round, almost always one round). On error the rows stay.
  Status EnforceBudget(Shard& shard, ShardIo& io) const REQUIRES(shard.mu);
  // The number of rows the shard may keep to be within budget.
  int64_t TargetRows(const Shard& shard) const REQUIRES(shard.mu);
  // Copies the rows of io.keys that live only on disk and have not expired
  // into io.rows; io.slots[i] = i if found, -1 if not. Changes nothing.
  Status ReadDiskRows(ShardIo& io) const;
  void PrefetchLoop(int loader);
  // Loads the rows of request.keys that belong to `loader`'s shards.
  void PrefetchBatch(const PrefetchRequest& request, int loader);
  // Pins `keys` (all of shard s) and loads those of them that live on disk:
  // the disk is read without the shard's lock, then the rows that neither
  // memory nor disk changed meanwhile are inserted under it.
  Status PrefetchShard(Shard& shard, int s, const PrefetchRequest& request,
                       BatchScratch& batch) const;
  // Returns when every prefetch queue is empty and every loader idle.
  void WaitForPrefetch();
  // Pins (see PinnedKey): Pin adds the keys of shard s in `batch` with
  // `until_step`; Unpin drops them. Spared says whether eviction should pass
  // over the row at `slot` at `step`: pulled at `step`, or pinned.
  void Pin(Shard& shard, int s, int64_t until_step, const BatchScratch& batch) const
      REQUIRES(shard.mu);
  void Unpin(Shard& shard, int s, const BatchScratch& batch) const REQUIRES(shard.mu);
  bool Spared(const Shard& shard, int64_t slot, int64_t step) const REQUIRES(shard.mu);
  // Drops pins that expired before `step`; returns how many remain.
  int64_t DropExpiredPins(Shard& shard, int64_t step) const REQUIRES(shard.mu);

  const EmbeddingTableOptions options_;
  const int dim_;
  const int num_shards_;
  // Floats before the RowMeta of a row: weights and optimizer state.
  const int64_t meta_offset_;
  const int64_t row_floats_;
  // Floats per row in the arena: row_floats_, epoch, policy links.
  const int64_t stride_floats_;
  const float init_scale_;
  const uint64_t admission_seed_;
  // Null without a disk tier.
  const std::unique_ptr<Tier> disk_;
  // Bytes each shard may hold; 0 without a disk tier.
  const int64_t shard_budget_bytes_;
  // Chunks reserved for the shards' rows (Reserve); null with a disk tier.
  // Before shards_, which give their chunks back when destroyed.
  const std::unique_ptr<ChunkPool> chunk_pool_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::atomic<int64_t> step_{0};
  // The step of the last EvictExpired (with ttl_steps > 0); disk rows older
  // than it by more than ttl_steps are expired. Written before EvictExpired
  // locks any shard and read under a shard's lock, so the shard mutex orders
  // it; relaxed suffices.
  std::atomic<int64_t> last_evict_step_;

  // Scratch buffers kept between batches so that a steady stream of batches
  // allocates nothing. A pool rather than thread_local: a thread waiting in a
  // parallel loop may run another batch's task (oneTBB work stealing).
  Mutex scratch_mu_;
  std::vector<std::unique_ptr<BatchScratch>> free_scratch_ GUARDED_BY(scratch_mu_);
  // The grouped keys and resolved rows of recent Pulls, newest last, for the
  // Push of the same keys to reuse instead of hashing, grouping and probing
  // the index again (a training step pushes exactly the keys it pulled). At
  // most 8 (more batches than a pipeline usually has in flight between pull
  // and push; beyond that a Push resolves afresh); the oldest goes back to
  // free_scratch_.
  std::vector<std::unique_ptr<BatchScratch>> resolved_pulls_ GUARDED_BY(scratch_mu_);
  // Keys grouped by PrepareKeys for their Pull, newest last, under the same
  // bound.
  std::vector<std::unique_ptr<BatchScratch>> prepared_ GUARDED_BY(scratch_mu_);
  std::atomic<int64_t> prepared_pulls_{0};  // TableStats::prepared_pulls.

  // Prefetch: one bounded queue of requests per loader; prefetch_mu_ guards
  // every loader's queue and busy flag.
  Mutex prefetch_mu_;
  CondVar prefetch_cv_;
  std::vector<std::unique_ptr<PrefetchLoader>> loaders_;
  bool prefetch_closed_ GUARDED_BY(prefetch_mu_) = false;
  // The first error of the worker not yet returned by a Pull or Push.
  Status prefetch_error_ GUARDED_BY(prefetch_mu_);
  // Whether prefetch_error_ is set: lets Pull and Push skip the mutex. Set
  // with release after prefetch_error_ under the mutex, read with acquire.
  std::atomic<bool> has_prefetch_error_{false};
};

template <typename ShardFn>
inline Status MemoryTable::ForEachShard(BatchScratch& batch, const ShardFn& shard_fn) const {
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
    return Status::ResourceExhausted("embedding table: out of memory creating rows (",
                                     num_rows(), " rows, ", memory_bytes(), " bytes held)");
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
ShardIo* MemoryTable::SplitByTier(Shard& shard, int s, BatchScratch& batch,
                                  const InMemory& in_memory, const NotHeld& not_held) const {
  ShardIo* io = disk_ != nullptr ? &batch.io[s] : nullptr;
  if (io != nullptr) {
    io->keys.clear();
    io->positions.clear();
  }
  const int64_t end = batch.begin[s + 1];
  for (int64_t k = batch.begin[s]; k < end; ++k) {
    const int64_t slot = shard.index.Find(batch.keys[k], batch.hashes[k]);
    if (slot >= 0) {
      in_memory(k, slot);
    } else if (io != nullptr) {
      io->keys.push_back(batch.keys[k]);
      io->positions.push_back(k);
    } else {
      not_held(k);
    }
  }
  return io;
}

}  // namespace ember::embedding::internal
