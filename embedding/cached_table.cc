// The hot path of internal::CachedTable: Pull, Push, Lookup, TTL and
// statistics of a row cache, in front of a tier or alone (see
// embedding/internal/cached_table.h).
//
// Each shard of a batch, under the cache's lock of that shard, finds the
// rows the cache holds; with a tier behind, it reads the others with batched
// Gets before it creates the admitted keys that neither level holds, and
// after copying or updating the rows it writes back the cache's victims if
// the shard is over budget.

#include "embedding/internal/cached_table.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "core/random.h"
#include "core/status.h"
#include "embedding/internal/key_filter.h"

namespace ember::embedding::internal {
namespace {

RowCacheOptions CacheOptions(const EmbeddingTableOptions& options, bool with_disk) {
  RowCacheOptions cache;
  cache.table = options;
  cache.overhead_bytes = CachedTable::OverheadBytes(options.num_shards, with_disk);
  cache.io_chunk_rows = with_disk ? kIoChunkRows : 0;
  return cache;
}

}  // namespace

CachedTable::CachedTable(const EmbeddingTableOptions& options, std::unique_ptr<Tier> disk)
    : cache_(CacheOptions(options, disk != nullptr)), disk_(std::move(disk)) {
  if (disk_ == nullptr) return;
  // A filter may take a quarter of its shard's budget (up to 3.3 bytes per
  // disk key: room for ~25 disk keys per cache row of 300 bytes), the rest
  // is for rows; past that it saturates and the shard asks the disk about
  // every key it lacks.
  // (At most 2 GiB: next_tier_bytes is 32 bits.)
  max_filter_bytes_ = std::min<int64_t>(cache_.budget().shard_budget_bytes() / kFilterShareOfBudget,
                                        int64_t{1} << 31);
  disk_keys_ = std::make_unique<std::unique_ptr<KeyFilter>[]>(cache_.num_shards());
  // Loader i serves shards i, i + n, ...: no more loaders than shards.
  const int loaders = std::min(options.prefetch_threads, options.num_shards);
  for (int i = 0; i < loaders; ++i) loaders_.push_back(std::make_unique<PrefetchLoader>());
  for (int i = 0; i < loaders; ++i) {
    loaders_[i]->thread = std::thread([this, i] { PrefetchLoop(i); });
  }
}

CachedTable::~CachedTable() {
  {
    MutexLock lock(prefetch_mu_);
    prefetch_closed_ = true;
  }
  prefetch_cv_.NotifyAll();
  for (auto& loader : loaders_) loader->thread.join();
}

Status CachedTable::LoadDiskKeys() {
  return disk_->Scan([&](Key key, const char*) -> Status {
    const uint64_t hash = Mix64(key);
    Shard& shard = cache_.shard(cache_.ShardOf(hash));
    MutexLock lock(shard.mu);
    // One key at a time: a tier's Scan order need not be by shard.
    AddDiskKeys(shard, {key});
    ++shard.next.disk_rows;
    return Status::OK();
  });
}

int64_t CachedTable::OverheadBytes(int num_shards, bool with_disk) {
  // A pointer per shard to the cache's shard and, with a tier behind, one to
  // its filter.
  return static_cast<int64_t>(sizeof(CachedTable)) +
         int64_t{num_shards} * (with_disk ? 2 : 1) * static_cast<int64_t>(sizeof(void*));
}

Status CachedTable::TakePrefetchError() {
  // Acquire: pairs with the release in PrefetchBatch, so that the error is
  // set when the flag is seen (the mutex below orders it anyway).
  if (!has_prefetch_error_.load(std::memory_order_acquire)) return Status::OK();
  MutexLock lock(prefetch_mu_);
  Status error = std::move(prefetch_error_);
  prefetch_error_ = Status::OK();
  has_prefetch_error_.store(false, std::memory_order_relaxed);
  return error;
}

Status CachedTable::ResolveRows(Shard& shard, int s, Access access, int64_t step,
                                BatchScratch& batch) const {
  if (disk_ == nullptr) {
    cache_.ResolveRows(shard, s, access, step, batch);
    return Status::OK();
  }
  // Find what the cache holds, read the rest from disk, and only then decide
  // on creating rows, so that a row living on disk is never created afresh.
  // Rows never move while rows are added, so the pointers of the first pass
  // stay valid.
  ShardIo& io = batch.io[s];
  cache_.FindResident(shard, s, batch, io);
  shard.next.memory_hits +=
      (batch.begin[s + 1] - batch.begin[s]) - static_cast<int64_t>(io.keys.size());
  if (io.keys.empty()) return Status::OK();
  EMBER_RETURN_IF_ERROR(LoadFromDisk(shard, access, io));
  const int64_t missing = static_cast<int64_t>(io.keys.size());
  for (int64_t i = 0; i < missing; ++i) {
    const int64_t k = io.positions[i];
    int64_t slot = io.slots[i];
    if (slot < 0) slot = cache_.CreateIfAdmitted(shard, io.keys[i], batch.hashes[k], access, step);
    if (slot >= 0) batch.rows[k] = shard.rows.row(slot);
  }
  return Status::OK();
}

Status CachedTable::Pull(const std::vector<Key>& keys, float* out) {
  if (keys.empty()) return Status::OK();
  if (out == nullptr) {
    return Status::InvalidArgument("Pull: out is null for ", keys.size(), " keys");
  }
  EMBER_RETURN_IF_ERROR(TakePrefetchError());
  BatchScratchPool& batches = cache_.batches();
  std::unique_ptr<BatchScratch> batch = batches.GroupForPull(keys);
  if (disk_ != nullptr) MarkPulled(*batch);
  const int64_t step = cache_.step();
  Status status = cache_.ForEachShard(*batch, [&](int s) -> Status {
    Shard& shard = cache_.shard(s);
    MutexLock lock(shard.mu);
    EMBER_RETURN_IF_ERROR(ResolveRows(shard, s, Access::kPull, step, *batch));
    // The Pull a Prefetch was for has come: its rows follow the policy again.
    if (!shard.pinned.empty()) cache_.budget().Unpin(shard, s, *batch);
    cache_.CopyOut(shard, s, *batch, step, out);
    return WriteBackIfTiered(shard, *batch, s);
  });
  // Without a tier behind, a Push of these keys can reuse this grouping and,
  // where no row moved since, these rows (see the class comment).
  if (status.ok() && disk_ == nullptr) {
    batches.Keep(BatchScratchPool::Kept::kResolvedPull, keys, std::move(batch));
  } else {
    batches.Return(std::move(batch));
  }
  return status;
}

Status CachedTable::Push(const std::vector<Key>& keys, const float* grads) {
  if (keys.empty()) return Status::OK();
  if (grads == nullptr) {
    return Status::InvalidArgument("Push: grads is null for ", keys.size(), " keys");
  }
  EMBER_RETURN_IF_ERROR(TakePrefetchError());
  BatchScratchPool& batches = cache_.batches();
  std::unique_ptr<BatchScratch> batch =
      disk_ == nullptr ? batches.TakeKept(BatchScratchPool::Kept::kResolvedPull, keys) : nullptr;
  const bool pulled = batch != nullptr;
  if (!pulled) {
    batch = batches.Take();
    batches.Group(keys, *batch);
  }
  const int64_t step = cache_.step();
  Status status = cache_.ForEachShard(*batch, [&](int s) -> Status {
    Shard& shard = cache_.shard(s);
    MutexLock lock(shard.mu);
    // The Pull's rows hold when they all existed and none has moved since
    // (rows move only when a row is removed); else resolve as for any Push.
    if (!pulled || !batch->all_rows[s] || batch->removals[s] != shard.rows.removals()) {
      EMBER_RETURN_IF_ERROR(ResolveRows(shard, s, Access::kPush, step, *batch));
    }
    cache_.ApplyGradients(shard, s, *batch, grads);
    return WriteBackIfTiered(shard, *batch, s);
  });
  batches.Return(std::move(batch));
  return status;
}

Status CachedTable::Lookup(const std::vector<Key>& keys, float* out) {
  if (keys.empty()) return Status::OK();
  if (out == nullptr) {
    return Status::InvalidArgument("Lookup: out is null for ", keys.size(), " keys");
  }
  GroupedBatch batch(cache_.batches(), keys);
  const int dim = cache_.dim();
  // The keys the cache lacks are read from the tier behind, if there is one.
  return ForEachShardByResidence(
      *batch,
      [&](const Shard& shard, const ShardIo*, int64_t k, int64_t slot) {
        cache_.LoadRowWeights(shard.rows.row(slot), out + batch->positions[k] * dim);
      },
      [&](const Shard&, ShardIo* io, int64_t k) {
        if (io == nullptr) {
          cache_.ReadAbsent(batch->keys[k], out + batch->positions[k] * dim);
          return;
        }
        io->keys.push_back(batch->keys[k]);
        io->positions.push_back(k);
      },
      [&](const Shard& shard, ShardIo* io) {
        if (io == nullptr || io->keys.empty()) return Status::OK();
        return LookupOnDisk(shard, *batch, *io, out);
      });
}

Status CachedTable::LookupOnDisk(const Shard& shard, const BatchScratch& batch, ShardIo& io,
                                 float* out) const {
  EMBER_RETURN_IF_ERROR(ReadDiskRows(&shard, io));
  const int dim = cache_.dim();
  const size_t held_bytes = sizeof(float) * cache_.row_floats();
  for (size_t i = 0; i < io.keys.size(); ++i) {
    float* dst = out + batch.positions[io.positions[i]] * dim;
    if (io.slots[i] < 0) {
      cache_.ReadAbsent(io.keys[i], dst);
    } else {
      cache_.LoadRowWeights(reinterpret_cast<const float*>(io.rows.data() + i * held_bytes), dst);
    }
  }
  return Status::OK();
}

int64_t CachedTable::EvictExpiredAt(int64_t step) {
  if (disk_ == nullptr) return cache_.EvictExpiredAt(step, nullptr);
  // The cache calls back under the shard's lock.
  return cache_.EvictExpiredAt(step, [this](Shard& shard, const std::vector<Key>& keys) {
    DeleteExpiredCopies(shard, keys);
  });
}

int64_t CachedTable::eviction_step() const {
  const int64_t step = cache_.last_eviction_step();
  return step == std::numeric_limits<int64_t>::min() ? -1 : step;
}

void CachedTable::RestoreEvictionStep(int64_t step) {
  if (step >= 0) EvictExpiredAt(step);
}

int64_t CachedTable::num_rows() const {
  int64_t rows = 0;
  for (int s = 0; s < cache_.num_shards(); ++s) {
    const Shard& shard = cache_.shard(s);
    MutexLock lock(shard.mu);
    rows += shard.index.size() + shard.next.disk_rows;
  }
  return rows;
}

TableStats CachedTable::stats() const {
  TableStats stats = cache_.BaseStats();
  for (int s = 0; s < cache_.num_shards(); ++s) {
    const Shard& shard = cache_.shard(s);
    MutexLock lock(shard.mu);
    cache_.AddShardStats(shard, &stats);
    // The tier statistics stay zero without a tier behind.
    if (disk_ == nullptr) continue;
    const NextTierShard& next = shard.next;
    stats.rows += next.disk_rows;
    stats.evicted_rows += next.expired;
    stats.memory_rows += shard.index.size();
    stats.disk_rows += next.disk_rows;
    stats.memory_hits += next.memory_hits;
    stats.disk_hits += next.disk_hits;
    stats.prefetched_rows += next.prefetched;
    stats.spilled_rows += next.spilled;
    stats.disk_reads += next.disk_reads;
    stats.disk_writes += next.disk_writes;
  }
  return stats;
}

}  // namespace ember::embedding::internal
