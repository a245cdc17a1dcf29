#pragma once

// The one table of embedding/: a row cache (row_cache.h) that wraps an
// optional Tier (embedding/tier.h). With no tier behind it, the cache holds
// every row and has no budget: NewMemoryTable's table. With a tier behind it,
// the cache keeps to a budget and the tier holds the rest: NewTieredTable's
// table (see embedding/tiered_table.h for the design). Each operation is one
// loop over the shards of a batch, each shard under the cache's lock of it,
// that works on the cache and then, if there is one, on the tier behind.
// cached_table.cc (the hot path), cached_table_disk.cc (loading, write-back
// and TTL of rows in the tier behind), cached_table_prefetch.cc (the
// Prefetch loaders) and cached_table_rows.cc (stored rows) implement it.
//
// With a tier behind: a key's row is its cache row if the cache's shard
// holds the key, else its row in the tier. Loading a row leaves the tier's
// copy in place, stale from then on (this saves a Delete per load); writing
// back overwrites it, and erasing or TTL-evicting a cache row deletes it.
// Every read (Scan, ReadRows, Lookup, row_meta) looks in the cache first.
// All of a shard's work on both levels happens under the cache's lock of
// that shard, which also guards the shard's NextTierShard.

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "core/random.h"
#include "core/status.h"
#include "embedding/embedding_table.h"
#include "embedding/internal/key_filter.h"
#include "embedding/internal/row_cache.h"
#include "embedding/stored_rows.h"
#include "embedding/tier.h"

namespace ember::embedding::internal {

// Rows per batched read or write of a shard in the tier behind: large enough
// that RocksDB's per-call costs vanish (a MultiGet of 128 keys took ~6% more
// per row at dim 64 in embedding_bench; 512 covers a shard's share of a
// 50k-key batch), small enough that the row buffers each shard keeps between
// batches (outside the budget, in TableStats::scratch_bytes) stay a few
// hundred KiB.
constexpr int64_t kIoChunkRows = 512;

// The most of a shard's budget its filter of disk keys may take, as a
// fraction 1 / kFilterShareOfBudget.
constexpr int64_t kFilterShareOfBudget = 4;

// Keys ahead of the one being tested whose filter blocks a loop over keys
// prefetches: enough for their cache misses to overlap.
constexpr size_t kFilterPrefetchDistance = 8;

// One Prefetch call: its keys, and the step until which their rows are
// spared by eviction. Every loader serves every request, taking its shards
// one at a time, so that none idles while another has shards left.
struct PrefetchRequest {
  std::vector<Key> keys;
  // The table's step when Prefetch was called.
  int64_t step = 0;
  int64_t pin_until_step = 0;
  // The fingerprint of `keys` (see FingerprintTerm), for a Pull to tell that it
  // is the Pull these keys were for.
  uint64_t fingerprint = 0;
  // Set by that Pull when it begins: the loaders drop what they have not
  // read of the request yet (the Pull reads it itself), and pin nothing.
  std::atomic<bool> pulled{false};

  // The loaders' shared state: `keys` grouped by shard (by the first loader
  // to start the request, under `grouped`), the next shard to take, and the
  // loaders yet to finish the request (the last returns `batch` to the
  // pool).
  std::once_flag grouped;
  std::unique_ptr<BatchScratch> batch;
  std::atomic<int> next_shard{0};
  std::atomic<int> loaders_left{0};
};

// A key's term in the fingerprint of a set of keys, given its Mix64 hash:
// the set's size plus the sum of its keys' terms is the same for the same
// keys in any order, and different for other keys but for a chance of about
// 2^-64.
inline uint64_t FingerprintTerm(uint64_t hash) { return Mix64(hash ^ 0x9e3779b97f4a7c15ULL); }

// A background thread that loads the rows of Prefetch requests, from its
// own bounded queue of them (every loader's queue holds every request).
struct PrefetchLoader {
  std::deque<std::shared_ptr<PrefetchRequest>> queue;
  bool busy = false;
  std::thread thread;
};

// A table is its own StoredRows: both interfaces work on the one cache and
// the tier behind it. Without a tier behind, Prefetch does nothing (there is
// nothing to load) and a Push of the keys a Pull just read reuses that
// Pull's grouping and rows while none of them moved
// (BatchScratchPool::Kept::kResolvedPull); with one, the Push resolves again:
// it touches the eviction policy and the tier statistics.
//
// Thread safety: as EmbeddingTable and StoredRows say. With a tier behind,
// options.prefetch_threads background threads owned by the table serve
// Prefetch, sharing each request's shards; the StoredRows methods wait until
// they are idle before they start.
class CachedTable final : public EmbeddingTable, public StoredRows {
 public:
  // `disk`: the tier behind the cache, or null for a table all in memory.
  // May throw std::bad_alloc. REQUIRES: ValidateTableOptions(options) is OK;
  // without `disk`, options.memory_budget_bytes is 0; with it, the options
  // passed NewTieredTable's checks and disk holds rows of
  // TierRowBytes(options) bytes, and LoadDiskKeys must run before the table
  // is used.
  CachedTable(const EmbeddingTableOptions& options, std::unique_ptr<Tier> disk);
  ~CachedTable() override;
  CachedTable(const CachedTable&) = delete;
  CachedTable& operator=(const CachedTable&) = delete;

  // --- EmbeddingTable (cached_table.cc, cached_table_prefetch.cc) ---
  Status Pull(const std::vector<Key>& keys, float* out) override;
  Status Push(const std::vector<Key>& keys, const float* grads) override;
  Status Lookup(const std::vector<Key>& keys, float* out) override;
  void set_step(int64_t step) override { cache_.set_step(step); }
  int64_t step() const override { return cache_.step(); }
  int64_t EvictExpired() override { return EvictExpiredAt(cache_.step()); }
  int dim() const override { return cache_.dim(); }
  int64_t num_rows() const override;
  int64_t memory_bytes() const override { return cache_.memory_bytes(); }
  TableStats stats() const override;
  void Prefetch(const std::vector<Key>& keys) override;
  void PrepareKeys(const std::vector<Key>& keys) override { cache_.batches().Prepare(keys); }
  // Without a tier behind: row chunks in the cache's ChunkPool, and each
  // shard's index sized for its share. With one, the budget holds the cache
  // to it: validates `rows` and makes no room.
  Status Reserve(int64_t rows) override { return cache_.Reserve(rows); }
  StoredRows& stored_rows() override { return *this; }

  // --- StoredRows (cached_table_rows.cc) ---
  int64_t row_floats() const override { return cache_.stored_row_floats(); }
  std::optional<RowMeta> row_meta(Key key) const override;
  Status Scan(const RowVisitor& visit) override;
  Status ReadRows(const std::vector<Key>& keys, float* rows,
                  std::vector<int64_t>* missing) override;
  Status WriteRows(const std::vector<Key>& keys, const float* rows) override;
  Status EraseRows(const std::vector<Key>& keys) override;
  void TakeChanges(std::vector<Key>* changed, std::vector<Key>* removed) override;
  bool tracks_changes() const override { return cache_.options().track_changes; }
  Status SaveAdmissionState(std::string* out) override { return cache_.SaveAdmissionState(out); }
  Status RestoreAdmissionState(std::string_view state) override {
    return cache_.RestoreAdmissionState(state);
  }
  int64_t eviction_step() const override;
  void RestoreEvictionStep(int64_t step) override;

  // Bytes of the table outside its shards, with or without a tier behind:
  // counted in memory_bytes() and taken off the budget.
  static int64_t OverheadBytes(int num_shards, bool with_disk);

  // Counts the rows the disk tier holds as the table's (stats().disk_rows)
  // and adds their keys to the shards' filters: a table opened on a disk
  // tier that holds rows reads them. Called once, by NewTieredTable, before
  // any other method. Returns the disk's Scan errors.
  Status LoadDiskKeys();

 private:
  // --- cached_table.cc ---
  // The loop of Lookup and the StoredRows methods: for every shard s with
  // keys in `batch`, under the shard's lock, calls in_cache(shard, io, k,
  // slot) for each key k (an index into `batch`) the cache holds and
  // not_held(shard, io, k) for the others, in batch order, then returns
  // then(shard, io). `io` is shard s's ShardIo, its keys, positions and
  // loaded cleared, with a tier behind; null without one. Returns the first
  // error of a shard, as RowCache::ForEachShard does.
  template <typename InCache, typename NotHeld, typename Then>
  Status ForEachShardByResidence(BatchScratch& batch, const InCache& in_cache,
                                 const NotHeld& not_held, const Then& then) const;
  // Resolves the keys of shard s in `batch` to rows: the cache's, then rows
  // loaded from disk, then new rows of the admitted keys neither holds.
  Status ResolveRows(Shard& shard, int s, Access access, int64_t step, BatchScratch& batch) const
      REQUIRES(shard.mu);
  // Lookup's disk half for shard s: the rows of io.keys (batch indices in
  // io.positions), which the cache lacks, from disk or as absent keys read.
  Status LookupOnDisk(const Shard& shard, const BatchScratch& batch, ShardIo& io, float* out) const
      REQUIRES(shard.mu);
  // Writes back the cache's victims if there is a tier behind (WriteBack).
  Status WriteBackIfTiered(Shard& shard, BatchScratch& batch, int s) const REQUIRES(shard.mu) {
    return disk_ != nullptr ? WriteBack(shard, batch.io[s]) : Status::OK();
  }
  // EvictExpired as if step() were `step`: the cache's TTL pass, deleting
  // the disk copies of the rows it removed.
  int64_t EvictExpiredAt(int64_t step);
  Status TakePrefetchError();

  // --- cached_table_rows.cc ---
  // The disk halves of WriteRows and EraseRows for one shard: io.keys (the
  // keys the cache lacks, batch indices in io.positions) written to disk;
  // the keys of io.keys the disk holds, and those of io.loaded (in the
  // cache), deleted from both.
  Status WriteToDisk(Shard& shard, const BatchScratch& batch, ShardIo& io, const float* rows) const
      REQUIRES(shard.mu);
  Status EraseFromDisk(Shard& shard, ShardIo& io) const REQUIRES(shard.mu);

  // --- cached_table_disk.cc ---
  // Whether a row read from disk with `meta` was removed by TTL: it expired
  // at the last EvictExpired, which saw only cache rows.
  bool ExpiredOnDisk(const float* meta) const;
  // Reads io.keys from disk; loads each row that has not expired into the
  // cache (io.slots[i]: its slot, or -1) and deletes the expired rows from
  // disk. On error the cache is as it was.
  Status LoadFromDisk(Shard& shard, Access access, ShardIo& io) const REQUIRES(shard.mu);
  // Writes the cache's victims to disk and drops them until the shard is
  // within its budget (one Put per kIoChunkRows rows, almost always one
  // round). On error the rows not yet written stay in the cache.
  Status WriteBack(Shard& shard, ShardIo& io) const REQUIRES(shard.mu);
  // Copies the rows of io.keys that live only on disk and have not expired
  // into io.rows; io.slots[i] = i if found, -1 if not. Changes nothing.
  // With `shard` (whose keys io.keys are; REQUIRES its lock) only the keys
  // its filter lets through are read; null: every key is (the caller
  // filtered them).
  Status ReadDiskRows(const Shard* shard, ShardIo& io) const;
  // io.candidates = the indices of the io.keys that the shard's filter
  // says the disk may hold. REQUIRES: io.keys are all keys of `shard`.
  void SelectDiskCandidates(const Shard& shard, ShardIo& io) const REQUIRES(shard.mu);
  // Whether the disk may hold the key of `hash`. REQUIRES the lock of the
  // key's shard.
  bool MayBeOnDisk(uint64_t hash) const {
    const std::unique_ptr<KeyFilter>& filter = disk_keys_[cache_.ShardOf(hash)];
    return filter != nullptr && filter->MayContain(hash);
  }
  // Adds `keys` (all of `shard`, about to be written to disk) to the shard's
  // filter, making it if need be, and updates shard.next_tier_bytes.
  void AddDiskKeys(Shard& shard, const std::vector<Key>& keys) const REQUIRES(shard.mu);
  // Called just before `keys` (all of `shard`) are written to or deleted
  // from disk: adds them to shard.next.reading while loaders read the
  // shard's rows without its lock (see ChangeLog).
  void NoteDiskChange(Shard& shard, const std::vector<Key>& keys) const REQUIRES(shard.mu);
  // Deletes the disk copies of the rows TTL removed from the cache.
  void DeleteExpiredCopies(Shard& shard, const std::vector<Key>& keys) const REQUIRES(shard.mu);

  // --- cached_table_prefetch.cc ---
  void PrefetchLoop(int loader);
  // Loads the rows of request.keys of the shards this loader takes.
  void PrefetchBatch(PrefetchRequest& request);
  // Pins `keys` (all of shard s) and loads those of them that live on disk:
  // the disk is read without the shard's lock, then the rows that neither
  // the cache nor the disk changed meanwhile are inserted under it.
  Status PrefetchShard(Shard& shard, int s, const PrefetchRequest& request,
                       BatchScratch& batch) const;
  // Returns when every prefetch queue is empty and every loader idle (at
  // once without a tier behind: there are no loaders).
  void WaitForPrefetch();
  // Marks the pending requests for the keys of `batch` pulled.
  void MarkPulled(const BatchScratch& batch);

  RowCache cache_;
  // The tier behind the cache; null for a table all in memory, which then
  // has no filters and no loaders.
  const std::unique_ptr<Tier> disk_;
  // Per shard, the keys its disk rows may have (see tiered_table.h), guarded
  // by that shard's mutex; null until the shard first writes to disk. Its
  // bytes are the shard's next_tier_bytes. Outside Shard, and behind a
  // pointer, so that a table's least budget grows by a pointer per shard.
  std::unique_ptr<std::unique_ptr<KeyFilter>[]> disk_keys_;
  // The most bytes a shard's filter may take.
  int64_t max_filter_bytes_ = 0;

  // Prefetch: one bounded queue of requests per loader; prefetch_mu_ guards
  // every loader's queue and busy flag.
  Mutex prefetch_mu_;
  CondVar prefetch_cv_;
  std::vector<std::unique_ptr<PrefetchLoader>> loaders_;
  bool prefetch_closed_ GUARDED_BY(prefetch_mu_) = false;
  // The latest requests, for MarkPulled: any older one has been served.
  std::deque<std::shared_ptr<PrefetchRequest>> recent_requests_ GUARDED_BY(prefetch_mu_);
  // The first error of the worker not yet returned by a Pull or Push.
  Status prefetch_error_ GUARDED_BY(prefetch_mu_);
  // Whether prefetch_error_ is set: lets Pull and Push skip the mutex. Set
  // with release after prefetch_error_ under the mutex, read with acquire.
  std::atomic<bool> has_prefetch_error_{false};
};

template <typename InCache, typename NotHeld, typename Then>
inline Status CachedTable::ForEachShardByResidence(BatchScratch& batch, const InCache& in_cache,
                                                   const NotHeld& not_held,
                                                   const Then& then) const {
  return cache_.ForEachShard(batch, [&](int s) -> Status {
    Shard& shard = cache_.shard(s);
    MutexLock lock(shard.mu);
    ShardIo* io = disk_ != nullptr ? &batch.io[s] : nullptr;
    if (io != nullptr) {
      io->keys.clear();
      io->positions.clear();
      io->loaded.clear();
    }
    cache_.SplitByResidence(
        shard, s, batch, [&](int64_t k, int64_t slot) { in_cache(shard, io, k, slot); },
        [&](int64_t k) { not_held(shard, io, k); });
    return then(shard, io);
  });
}

}  // namespace ember::embedding::internal
