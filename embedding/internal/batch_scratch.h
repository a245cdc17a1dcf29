#pragma once

// A batch's keys grouped by the memory tier's shards, and the pool of such
// scratch that the tables keep between batches (see row_cache.h).

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "core/status.h"
#include "embedding/embedding_table.h"

namespace ember::embedding::internal {

// Per-shard buffers for the tier behind the memory tier, kept between
// batches; unused by a table without one.
struct ShardIo {
  std::vector<Key> keys;           // keys to read, write or delete
  std::vector<Key> chunk_keys;     // the keys of one chunk of disk I/O
  std::vector<int64_t> positions;  // where each of `keys` came from
                                   // (Prefetch: the batch indices it reads)
  std::vector<int64_t> slots;      // slot of each of `keys` after loading, or -1
  std::vector<int64_t> candidates;  // indices of the `keys` the disk may hold
  std::vector<int64_t> absent;     // Tier::Get's missing indices
  std::vector<char> rows;          // rows read or to write
  std::vector<Key> loaded;         // keys loaded or expired: deleted from disk
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
  std::vector<ShardIo> io;     // per shard; empty without a tier behind
  // For scratch kept for a later call with the same keys (see
  // BatchScratchPool::Keep): the caller's key array it was grouped from, and
  // a copy of its keys then (compared in one sequential pass when taken).
  const Key* kept_keys = nullptr;
  std::vector<Key> kept_copy;
  // Set by RowCache::CopyOut (a Pull) for the Push of the same keys: per
  // shard whether every key had a row and the shard's RowArena::removals()
  // when they were resolved. The rows are still valid while that count is
  // unchanged.
  std::vector<char> all_rows;     // per shard
  std::vector<int64_t> removals;  // per shard
};

// Scratch buffers kept between batches so that a steady stream of batches
// allocates nothing, and batches grouped for a later call with the same key
// array: keys grouped ahead of their Pull (PrepareKeys), and a Pull's
// resolved rows for the Push of the same keys. A pool rather than
// thread_local: a thread waiting in a parallel loop may run another batch's
// task (oneTBB work stealing).
// Thread safety: all methods may be called concurrently.
class BatchScratchPool {
 public:
  // `with_io`: scratch carries a ShardIo per shard. Row buffers of a ShardIo
  // above `keep_io_bytes` are freed when the scratch comes back.
  BatchScratchPool(int num_shards, bool with_io, int64_t keep_io_bytes);
  BatchScratchPool(const BatchScratchPool&) = delete;
  BatchScratchPool& operator=(const BatchScratchPool&) = delete;

  // Scratch for one batch (grouped by nothing yet).
  std::unique_ptr<BatchScratch> Take();
  void Return(std::unique_ptr<BatchScratch> scratch);
  // Groups `keys` by shard (Mix64(key) % num_shards) into `batch`: one
  // counting-sort pass that keeps the keys' order within a shard.
  void Group(const std::vector<Key>& keys, BatchScratch& batch) const;

  // Scratch kept for a later call with the same key array: grouped by
  // Prepare for a Pull, or a Pull's resolved rows for the Push.
  enum class Kept { kPrepared, kResolvedPull };
  // Keeps `scratch`, grouped from `keys`, as `kind`. At most 8 of a kind
  // are kept, the oldest going back to the pool.
  void Keep(Kept kind, const std::vector<Key>& keys, std::unique_ptr<BatchScratch> scratch);
  // The scratch of `kind` kept for `keys`, with its grouping checked against
  // them (same array, same keys), or null.
  std::unique_ptr<BatchScratch> TakeKept(Kept kind, const std::vector<Key>& keys);

  // Groups `keys` now and keeps them for their Pull (PrepareKeys).
  void Prepare(const std::vector<Key>& keys);
  // `keys` grouped for a Pull: as Prepare left them, or grouped now.
  std::unique_ptr<BatchScratch> GroupForPull(const std::vector<Key>& keys);
  // Bytes of the scratch the pool holds, free and kept (the capacities of
  // its buffers): TableStats::scratch_bytes.
  int64_t bytes() const;
  // Pulls that found their keys prepared (TableStats::prepared_pulls).
  int64_t prepared_pulls() const { return prepared_pulls_.load(std::memory_order_relaxed); }

 private:
  std::vector<std::unique_ptr<BatchScratch>>& KeptList(Kept kind) REQUIRES(mu_);

  const int num_shards_;
  const bool with_io_;
  const int64_t keep_io_bytes_;
  mutable Mutex mu_;
  std::vector<std::unique_ptr<BatchScratch>> free_ GUARDED_BY(mu_);
  // The grouped keys and resolved rows of recent Pulls, newest last, for the
  // Push of the same keys to reuse instead of hashing, grouping and probing
  // the index again (a training step pushes exactly the keys it pulled). At
  // most 8 (more batches than a pipeline usually has in flight between pull
  // and push; beyond that a Push resolves afresh); the oldest goes back to
  // free_.
  std::vector<std::unique_ptr<BatchScratch>> resolved_pulls_ GUARDED_BY(mu_);
  // Keys grouped by Prepare for their Pull, newest last, under the same
  // bound.
  std::vector<std::unique_ptr<BatchScratch>> prepared_ GUARDED_BY(mu_);
  std::atomic<int64_t> prepared_pulls_{0};
};

// A scratch taken from `pool` with `keys` grouped in it, given back to the
// pool when it goes out of scope (on every return path).
class GroupedBatch {
 public:
  GroupedBatch(BatchScratchPool& pool, const std::vector<Key>& keys)
      : pool_(pool), batch_(pool.Take()) {
    pool_.Group(keys, *batch_);
  }
  ~GroupedBatch() { pool_.Return(std::move(batch_)); }
  GroupedBatch(const GroupedBatch&) = delete;
  GroupedBatch& operator=(const GroupedBatch&) = delete;

  BatchScratch& operator*() { return *batch_; }
  BatchScratch* operator->() { return batch_.get(); }

 private:
  BatchScratchPool& pool_;
  std::unique_ptr<BatchScratch> batch_;
};

}  // namespace ember::embedding::internal
