// NewTieredTable and NewEmbeddingTable, and the hot path of
// internal::TieredTable: Pull, Push, Lookup, TTL and statistics of a memory
// tier in front of a disk tier (see embedding/internal/tiered_table.h).
//
// Each shard of a batch, under the memory tier's lock of that shard, finds
// the rows memory holds, reads the others with batched Gets, creates the
// admitted keys that neither tier holds, copies or updates the rows, and
// then writes back the memory tier's victims if the shard is over budget.

#include "embedding/internal/tiered_table.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#include <glog/logging.h>

#include "core/mutex.h"
#include "core/random.h"
#include "core/status.h"
#include "embedding/internal/key_filter.h"
#include "embedding/internal/table_options.h"
#include "embedding/rocksdb_tier.h"
#include "embedding/tiered_table.h"

namespace ember::embedding {
namespace internal {
namespace {

RowCacheOptions TierOptions(const EmbeddingTableOptions& options) {
  RowCacheOptions tier;
  tier.table = options;
  tier.overhead_bytes = TieredTable::OverheadBytes(options.num_shards);
  tier.io_chunk_rows = kIoChunkRows;
  return tier;
}

}  // namespace

TieredTable::TieredTable(const EmbeddingTableOptions& options, std::unique_ptr<Tier> disk)
    : memory_(TierOptions(options)), disk_(std::move(disk)) {
  // A filter may take a quarter of its shard's budget (up to 3.3 bytes per
  // disk key: room for ~25 disk keys per memory row of 300 bytes), the rest
  // is for rows; past that it saturates and the shard asks the disk about
  // every key it lacks.
  // (At most 2 GiB: next_tier_bytes is 32 bits.)
  max_filter_bytes_ = std::min<int64_t>(
      memory_.budget().shard_budget_bytes() / kFilterShareOfBudget, int64_t{1} << 31);
  disk_keys_ = std::make_unique<std::unique_ptr<KeyFilter>[]>(memory_.num_shards());
  // Loader i serves shards i, i + n, ...: no more loaders than shards.
  const int loaders = std::min(options.prefetch_threads, options.num_shards);
  for (int i = 0; i < loaders; ++i) loaders_.push_back(std::make_unique<PrefetchLoader>());
  for (int i = 0; i < loaders; ++i) {
    loaders_[i]->thread = std::thread([this, i] { PrefetchLoop(i); });
  }
}

TieredTable::~TieredTable() {
  {
    MutexLock lock(prefetch_mu_);
    prefetch_closed_ = true;
  }
  prefetch_cv_.NotifyAll();
  for (auto& loader : loaders_) loader->thread.join();
}

Status TieredTable::LoadDiskKeys() {
  return disk_->Scan([&](Key key, const char*) -> Status {
    const uint64_t hash = Mix64(key);
    Shard& shard = memory_.shard(memory_.ShardOf(hash));
    MutexLock lock(shard.mu);
    // One key at a time: a tier's Scan order need not be by shard.
    AddDiskKeys(shard, {key});
    ++shard.next.disk_rows;
    return Status::OK();
  });
}

int64_t TieredTable::OverheadBytes(int num_shards) {
  // A pointer per shard to the memory tier's shard and one to its filter.
  return static_cast<int64_t>(sizeof(TieredTable)) + int64_t{num_shards} * 2 * sizeof(void*);
}

Status TieredTable::TakePrefetchError() {
  // Acquire: pairs with the release in PrefetchBatch, so that the error is
  // set when the flag is seen (the mutex below orders it anyway).
  if (!has_prefetch_error_.load(std::memory_order_acquire)) return Status::OK();
  MutexLock lock(prefetch_mu_);
  Status error = std::move(prefetch_error_);
  prefetch_error_ = Status::OK();
  has_prefetch_error_.store(false, std::memory_order_relaxed);
  return error;
}

Status TieredTable::ResolveRows(Shard& shard, int s, Access access, int64_t step,
                                BatchScratch& batch) const {
  // Find what memory holds, read the rest from disk, and only then decide
  // on creating rows, so that a row living on disk is never created afresh.
  // Rows never move while rows are added, so the pointers of the first pass
  // stay valid.
  ShardIo& io = batch.io[s];
  memory_.FindResident(shard, s, batch, io);
  shard.next.memory_hits +=
      (batch.begin[s + 1] - batch.begin[s]) - static_cast<int64_t>(io.keys.size());
  if (io.keys.empty()) return Status::OK();
  EMBER_RETURN_IF_ERROR(LoadFromDisk(shard, access, io));
  const int64_t missing = static_cast<int64_t>(io.keys.size());
  for (int64_t i = 0; i < missing; ++i) {
    const int64_t k = io.positions[i];
    int64_t slot = io.slots[i];
    if (slot < 0) slot = memory_.CreateIfAdmitted(shard, io.keys[i], batch.hashes[k], access, step);
    if (slot >= 0) batch.rows[k] = shard.rows.row(slot);
  }
  return Status::OK();
}

Status TieredTable::Pull(const std::vector<Key>& keys, float* out) {
  if (keys.empty()) return Status::OK();
  if (out == nullptr) {
    return Status::InvalidArgument("Pull: out is null for ", keys.size(), " keys");
  }
  EMBER_RETURN_IF_ERROR(TakePrefetchError());
  std::unique_ptr<BatchScratch> batch = memory_.batches().GroupForPull(keys);
  MarkPulled(*batch);
  const int64_t step = memory_.step();
  Status status = memory_.ForEachShard(*batch, [&](int s) -> Status {
    Shard& shard = memory_.shard(s);
    MutexLock lock(shard.mu);
    EMBER_RETURN_IF_ERROR(ResolveRows(shard, s, Access::kPull, step, *batch));
    // The Pull a Prefetch was for has come: its rows follow the policy again.
    if (!shard.pinned.empty()) memory_.budget().Unpin(shard, s, *batch);
    memory_.CopyOut(shard, s, *batch, step, out);
    return WriteBack(shard, batch->io[s]);
  });
  // Unlike a memory table's, the Push of these keys resolves again: it
  // touches the eviction policy and the tier statistics.
  memory_.batches().Return(std::move(batch));
  return status;
}

Status TieredTable::Push(const std::vector<Key>& keys, const float* grads) {
  if (keys.empty()) return Status::OK();
  if (grads == nullptr) {
    return Status::InvalidArgument("Push: grads is null for ", keys.size(), " keys");
  }
  EMBER_RETURN_IF_ERROR(TakePrefetchError());
  BatchScratchPool& batches = memory_.batches();
  GroupedBatch batch(batches, keys);
  const int64_t step = memory_.step();
  Status status = memory_.ForEachShard(*batch, [&](int s) -> Status {
    Shard& shard = memory_.shard(s);
    MutexLock lock(shard.mu);
    EMBER_RETURN_IF_ERROR(ResolveRows(shard, s, Access::kPush, step, *batch));
    memory_.ApplyGradients(shard, s, *batch, grads);
    return WriteBack(shard, batch->io[s]);
  });
  return status;
}

Status TieredTable::Lookup(const std::vector<Key>& keys, float* out) {
  if (keys.empty()) return Status::OK();
  if (out == nullptr) {
    return Status::InvalidArgument("Lookup: out is null for ", keys.size(), " keys");
  }
  BatchScratchPool& batches = memory_.batches();
  GroupedBatch batch(batches, keys);
  const int dim = memory_.dim();
  const size_t held_bytes = sizeof(float) * memory_.row_floats();
  Status status = memory_.ForEachShard(*batch, [&](int s) -> Status {
    Shard& shard = memory_.shard(s);
    MutexLock lock(shard.mu);
    ShardIo& io = batch->io[s];
    io.keys.clear();
    io.positions.clear();
    memory_.SplitByResidence(
        shard, s, *batch,
        [&](int64_t k, int64_t slot) {
          memory_.LoadRowWeights(shard.rows.row(slot), out + batch->positions[k] * dim);
        },
        [&](int64_t k) {
          io.keys.push_back(batch->keys[k]);
          io.positions.push_back(k);
        });
    if (io.keys.empty()) return Status::OK();
    EMBER_RETURN_IF_ERROR(ReadDiskRows(&shard, io));
    for (size_t i = 0; i < io.keys.size(); ++i) {
      float* dst = out + batch->positions[io.positions[i]] * dim;
      if (io.slots[i] < 0) {
        memory_.ReadAbsent(io.keys[i], dst);
      } else {
        memory_.LoadRowWeights(reinterpret_cast<const float*>(io.rows.data() + i * held_bytes), dst);
      }
    }
    return Status::OK();
  });
  return status;
}

int64_t TieredTable::EvictExpiredAt(int64_t step) {
  // The memory tier calls back under the shard's lock.
  return memory_.EvictExpiredAt(step, [this](Shard& shard, const std::vector<Key>& keys) {
    DeleteExpiredCopies(shard, keys);
  });
}

int64_t TieredTable::eviction_step() const {
  const int64_t step = memory_.last_eviction_step();
  return step == std::numeric_limits<int64_t>::min() ? -1 : step;
}

void TieredTable::RestoreEvictionStep(int64_t step) {
  if (step >= 0) EvictExpiredAt(step);
}

int64_t TieredTable::num_rows() const {
  int64_t rows = 0;
  for (int s = 0; s < memory_.num_shards(); ++s) {
    const Shard& shard = memory_.shard(s);
    MutexLock lock(shard.mu);
    rows += shard.index.size() + shard.next.disk_rows;
  }
  return rows;
}

TableStats TieredTable::stats() const {
  TableStats stats = memory_.BaseStats();
  for (int s = 0; s < memory_.num_shards(); ++s) {
    const Shard& shard = memory_.shard(s);
    MutexLock lock(shard.mu);
    memory_.AddShardStats(shard, &stats);
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

namespace {

// The checks of a tiered table's options beyond ValidateTableOptions.
Status ValidateTieredOptions(const EmbeddingTableOptions& options) {
  const int64_t minimum = TieredTable::OverheadBytes(options.num_shards) +
                          options.num_shards * RowCache::MinShardBytes(options);
  if (options.memory_budget_bytes < minimum) {
    return Status::InvalidArgument("memory_budget_bytes must be at least ", minimum,
                                   " (one row in each of ", options.num_shards,
                                   " shards) for this dim, optimizer and admission, got ",
                                   options.memory_budget_bytes);
  }
  if (options.disk_block_cache_bytes < 0) {
    return Status::InvalidArgument("disk_block_cache_bytes must be >= 0, got ",
                                   options.disk_block_cache_bytes);
  }
  return Status::OK();
}

}  // namespace
}  // namespace internal

int64_t TierRowBytes(const EmbeddingTableOptions& options) {
  return internal::RowCache::RowFloats(options) * int64_t{sizeof(float)};
}

RocksDbTierOptions DiskTierOptions(const EmbeddingTableOptions& options) {
  RocksDbTierOptions disk_options;
  disk_options.path = options.disk_path;
  disk_options.row_bytes = TierRowBytes(options);
  disk_options.block_cache_bytes = options.disk_block_cache_bytes;
  disk_options.write_buffer_bytes = options.disk_write_buffer_bytes;
  // One shard's disk rows in one range of the database.
  disk_options.key_shards = options.num_shards;
  return disk_options;
}

Result<std::unique_ptr<EmbeddingTable>> NewTieredTable(const EmbeddingTableOptions& options,
                                                       std::unique_ptr<Tier> disk) {
  EMBER_RETURN_IF_ERROR(internal::ValidateTableOptions(options));
  if (options.memory_budget_bytes == 0) {
    return Status::InvalidArgument("NewTieredTable: memory_budget_bytes must be > 0");
  }
  EMBER_RETURN_IF_ERROR(internal::ValidateTieredOptions(options));
  if (disk == nullptr) return Status::InvalidArgument("NewTieredTable: disk tier is null");
  const int64_t row_bytes = TierRowBytes(options);
  if (disk->row_bytes() != row_bytes) {
    return Status::InvalidArgument("NewTieredTable: disk tier rows have ", disk->row_bytes(),
                                   " bytes, the table's have ", row_bytes);
  }
  std::unique_ptr<internal::TieredTable> table;
  try {
    table = std::make_unique<internal::TieredTable>(options, std::move(disk));
    EMBER_RETURN_IF_ERROR(table->LoadDiskKeys());
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("embedding table: out of memory creating ", options.num_shards,
                                     " shards");
  }
  return std::unique_ptr<EmbeddingTable>(std::move(table));
}

Result<std::unique_ptr<EmbeddingTable>> NewEmbeddingTable(const EmbeddingTableOptions& options) {
  if (options.memory_budget_bytes == 0) return NewMemoryTable(options);
  EMBER_RETURN_IF_ERROR(internal::ValidateTableOptions(options));
  EMBER_RETURN_IF_ERROR(internal::ValidateTieredOptions(options));
  if (options.disk_path.empty()) {
    return Status::InvalidArgument(
        "disk_path is required when memory_budget_bytes > 0 (the disk tier's directory)");
  }
  const RocksDbTierOptions disk_options = DiskTierOptions(options);
  // A table starts empty: rows an earlier table left in disk_path are
  // dropped (the tier is working space; checkpoints are what persists).
  // Opening first checks that the directory holds a tier, not some other
  // database, before anything is deleted.
  EMBER_ASSIGN_OR_RETURN(auto disk, NewRocksDbTier(disk_options));
  disk.reset();
  EMBER_RETURN_IF_ERROR(DestroyRocksDbTier(disk_options.path));
  EMBER_ASSIGN_OR_RETURN(disk, NewRocksDbTier(disk_options));
  return NewTieredTable(options, std::move(disk));
}

}  // namespace ember::embedding
