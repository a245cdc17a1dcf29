#pragma once

// NewTieredTable's table: a memory tier with a budget (row_cache.h) in
// front of a Tier (embedding/tier.h). See embedding/tiered_table.h for the
// design; tiered_table.cc (the hot path), tiered_shard.cc (loading,
// write-back and TTL of disk rows), tiered_prefetch.cc (the Prefetch
// loaders) and tiered_table_rows.cc (stored rows) implement it.
//
// A key's row is its memory row if the memory tier's shard holds the key,
// else its disk row. Loading a row leaves the disk copy in place, stale from
// then on (this saves a Delete per load); writing back overwrites it, and
// erasing or TTL-evicting a memory row deletes it. Every read (Scan,
// ReadRows, Lookup, row_meta) looks in memory first. All of a shard's work
// on both tiers happens under the memory tier's lock of that shard, which
// also guards the shard's NextTierShard.

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

// Rows per batched disk read or write of a shard: large enough that RocksDB's
// per-call costs vanish (a MultiGet of 128 keys took ~6% more per row at dim
// 64 in embedding_bench; 512 covers a shard's share of a 50k-key batch), small
// enough that the row buffers each shard keeps between batches (outside the
// budget, in TableStats::scratch_bytes) stay a few hundred KiB.
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
  // The fingerprint of `keys` (see FingerprintTerm), for a Pull to tell that it is the Pull these
  // keys were for.
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

// Thread safety: as EmbeddingTable and StoredRows say. options.
// prefetch_threads background threads owned by the table serve Prefetch,
// sharing each request's shards; the StoredRows methods wait until
// they are idle before they start.
class TieredTable final : public EmbeddingTable, public StoredRows {
 public:
  // May throw std::bad_alloc. REQUIRES: the options passed NewTieredTable's
  // checks; disk holds rows of TierRowBytes(options) bytes. LoadDiskKeys
  // must run before the table is used.
  TieredTable(const EmbeddingTableOptions& options, std::unique_ptr<Tier> disk);
  ~TieredTable() override;
  TieredTable(const TieredTable&) = delete;
  TieredTable& operator=(const TieredTable&) = delete;

  // --- EmbeddingTable (tiered_table.cc, tiered_prefetch.cc) ---
  Status Pull(const std::vector<Key>& keys, float* out) override;
  Status Push(const std::vector<Key>& keys, const float* grads) override;
  Status Lookup(const std::vector<Key>& keys, float* out) override;
  void set_step(int64_t step) override { memory_.set_step(step); }
  int64_t step() const override { return memory_.step(); }
  int64_t EvictExpired() override { return EvictExpiredAt(memory_.step()); }
  int dim() const override { return memory_.dim(); }
  int64_t num_rows() const override;
  int64_t memory_bytes() const override { return memory_.memory_bytes(); }
  TableStats stats() const override;
  void Prefetch(const std::vector<Key>& keys) override;
  void PrepareKeys(const std::vector<Key>& keys) override { memory_.batches().Prepare(keys); }
  // The budget holds the memory tier to it: validates `rows` and makes no
  // room.
  Status Reserve(int64_t rows) override { return memory_.Reserve(rows); }
  StoredRows& stored_rows() override { return *this; }

  // --- StoredRows (tiered_table_rows.cc) ---
  int64_t row_floats() const override { return memory_.stored_row_floats(); }
  std::optional<RowMeta> row_meta(Key key) const override;
  Status Scan(const RowVisitor& visit) override;
  Status ReadRows(const std::vector<Key>& keys, float* rows,
                  std::vector<int64_t>* missing) override;
  Status WriteRows(const std::vector<Key>& keys, const float* rows) override;
  Status EraseRows(const std::vector<Key>& keys) override;
  void TakeChanges(std::vector<Key>* changed, std::vector<Key>* removed) override;
  bool tracks_changes() const override { return memory_.options().track_changes; }
  Status SaveAdmissionState(std::string* out) override { return memory_.SaveAdmissionState(out); }
  Status RestoreAdmissionState(std::string_view state) override {
    return memory_.RestoreAdmissionState(state);
  }
  int64_t eviction_step() const override;
  void RestoreEvictionStep(int64_t step) override;

  // Bytes of the table outside its shards: counted in memory_bytes() and
  // taken off the budget.
  static int64_t OverheadBytes(int num_shards);

  // Counts the rows the disk tier holds as the table's (stats().disk_rows)
  // and adds their keys to the shards' filters: a table opened on a disk
  // tier that holds rows reads them. Called once, by NewTieredTable, before
  // any other method. Returns the disk's Scan errors.
  Status LoadDiskKeys();

 private:
  // --- tiered_table.cc ---
  // Resolves the keys of shard s in `batch` to rows: memory's, then rows
  // loaded from disk, then new rows of the admitted keys neither holds.
  Status ResolveRows(Shard& shard, int s, Access access, int64_t step, BatchScratch& batch) const
      REQUIRES(shard.mu);
  // EvictExpired as if step() were `step`: the memory tier's TTL pass,
  // deleting the disk copies of the rows it removed.
  int64_t EvictExpiredAt(int64_t step);
  Status TakePrefetchError();

  // --- tiered_shard.cc ---
  // Whether a row read from disk with `meta` was removed by TTL: it expired
  // at the last EvictExpired, which saw only memory rows.
  bool ExpiredOnDisk(const float* meta) const;
  // Reads io.keys from disk; loads each row that has not expired into memory
  // (io.slots[i]: its slot, or -1) and deletes the expired rows from disk.
  // On error memory is as it was.
  Status LoadFromDisk(Shard& shard, Access access, ShardIo& io) const REQUIRES(shard.mu);
  // Writes the memory tier's victims to disk and drops them until the shard
  // is within its budget (one Put per kIoChunkRows rows, almost always one
  // round). On error the rows not yet written stay in memory.
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
    const std::unique_ptr<KeyFilter>& filter = disk_keys_[memory_.ShardOf(hash)];
    return filter != nullptr && filter->MayContain(hash);
  }
  // Adds `keys` (all of `shard`, about to be written to disk) to the shard's
  // filter, making it if need be, and updates shard.next_tier_bytes.
  void AddDiskKeys(Shard& shard, const std::vector<Key>& keys) const REQUIRES(shard.mu);
  // Called just before `keys` (all of `shard`) are written to or deleted
  // from disk: adds them to shard.next.reading while loaders read the
  // shard's rows without its lock (see ChangeLog).
  void NoteDiskChange(Shard& shard, const std::vector<Key>& keys) const REQUIRES(shard.mu);
  // Deletes the disk copies of the rows TTL removed from memory.
  void DeleteExpiredCopies(Shard& shard, const std::vector<Key>& keys) const REQUIRES(shard.mu);

  // --- tiered_prefetch.cc ---
  void PrefetchLoop(int loader);
  // Loads the rows of request.keys of the shards this loader takes.
  void PrefetchBatch(PrefetchRequest& request);
  // Pins `keys` (all of shard s) and loads those of them that live on disk:
  // the disk is read without the shard's lock, then the rows that neither
  // memory nor disk changed meanwhile are inserted under it.
  Status PrefetchShard(Shard& shard, int s, const PrefetchRequest& request,
                       BatchScratch& batch) const;
  // Returns when every prefetch queue is empty and every loader idle.
  void WaitForPrefetch();
  // Marks the pending requests for the keys of `batch` pulled.
  void MarkPulled(const BatchScratch& batch);

  RowCache memory_;
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

}  // namespace ember::embedding::internal
