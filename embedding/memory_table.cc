// NewMemoryTable and NewEmbeddingTable: Pull, Push, Lookup, TTL eviction,
// statistics and the factories of internal::MemoryTable (see
// embedding/internal/memory_table.h for the layout).
//
// A batch is grouped by shard in one counting-sort pass; then each shard,
// under its own lock taken once per batch, resolves its keys to rows (the
// index lookups prefetched a few keys ahead; with a disk tier, the keys not
// in memory are read with one batched Get) and copies or updates them (the
// rows prefetched a few keys ahead); with a disk tier it then spills its
// coldest rows if it is over budget. Shards run in parallel in the caller's
// arena; there is no table-wide lock.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include <glog/logging.h>

#include "core/allocator.h"
#include "core/mutex.h"
#include "core/random.h"
#include "core/status.h"
#include "core/threads.h"
#include "embedding/embedding_table.h"
#include "embedding/internal/memory_table.h"
#include "embedding/rocksdb_tier.h"
#include "embedding/row_init.h"
#include "embedding/sparse_optimizer.h"
#include "embedding/tiered_table.h"

namespace ember::embedding {
namespace internal {
namespace {

// Upper bound on num_shards: beyond it a shard holds too little to be worth a
// mutex, and a typo (1e9) would otherwise allocate gigabytes of empty shards.
constexpr int kMaxShards = 1 << 16;
// Upper bound on dim, so that row sizes stay far from integer overflow.
constexpr int kMaxDim = 1 << 20;
// Target bytes of one chunk of the row arena.
constexpr int64_t kChunkBytes = int64_t{64} << 10;
// With a budget, chunks are at most this fraction of a shard's budget, so
// that the arena's granularity (and its one spare chunk) costs little of it.
constexpr int64_t kChunksPerShardBudget = 16;
// Keys looked ahead when prefetching index buckets and rows.
constexpr int64_t kPrefetchDistance = 16;
// Floats after the stored row: the change epoch.
constexpr int64_t kEpochFloats = 1;
// Entries of an empty KeyIndex (row_store.cc's kMinIndexCapacity).
constexpr int64_t kMinIndexBytes = 16 * 16;
// Salts that keep the admission hashes independent of row initialisation.
constexpr uint64_t kSketchSalt = 0x5ce7c4a3b1d2e9f1ULL;
constexpr uint64_t kProbabilitySalt = 0x9a1b7e3cd4f20865ULL;
constexpr uint64_t kPolicySalt = 0x3c6ef372fe94f82bULL;

// Records a Pull at `step`: frequency + 1 (saturating), last seen = step.
void TouchMeta(int64_t step, float* meta) {
  uint32_t frequency;
  std::memcpy(&frequency, meta + 4, sizeof(frequency));
  if (frequency != std::numeric_limits<uint32_t>::max()) ++frequency;
  std::memcpy(meta + 2, &step, sizeof(step));
  std::memcpy(meta + 4, &frequency, sizeof(frequency));
}

EvictionPolicy::Kind PolicyKind(const EmbeddingTableOptions& options, bool tiered) {
  if (!tiered) return EvictionPolicy::Kind::kNone;
  return options.eviction_policy == EmbeddingTableOptions::EvictionPolicy::kLfu
             ? EvictionPolicy::Kind::kLfu
             : EvictionPolicy::Kind::kLru;
}

int64_t StoredRowFloats(const EmbeddingTableOptions& options) {
  return options.dim + StateFloatsPerRow(options.optimizer.type, options.dim) + kMetaFloats;
}

int64_t SketchBytesPerShard(const EmbeddingTableOptions& options) {
  const AdmissionOptions& admission = options.admission;
  if (admission.kind != AdmissionOptions::Kind::kFrequency) return 0;
  const int64_t width = (admission.sketch_width + options.num_shards - 1) / options.num_shards;
  return static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(width))) *
         admission.sketch_depth * static_cast<int64_t>(sizeof(uint32_t));
}

}  // namespace

MemoryTable::MemoryTable(const EmbeddingTableOptions& options, std::unique_ptr<Tier> disk)
    : options_(options),
      dim_(options.dim),
      num_shards_(options.num_shards),
      meta_offset_(options.dim + StateFloatsPerRow(options.optimizer.type, options.dim)),
      row_floats_(meta_offset_ + kMetaFloats),
      stride_floats_(row_floats_ + kEpochFloats +
                     EvictionPolicy::LinkFloats(PolicyKind(options, disk != nullptr))),
      init_scale_(InitScale(options)),
      admission_seed_(HashCombine(options.seed, kProbabilitySalt)),
      disk_(std::move(disk)),
      shard_budget_bytes_(disk_ == nullptr ? 0
                                           : (options.memory_budget_bytes -
                                              TableOverheadBytes(options.num_shards)) /
                                                 options.num_shards),
      chunk_pool_(disk_ == nullptr ? std::make_unique<ChunkPool>(
                                         RowArena::ChunkBytesFor(stride_floats_, kChunkBytes))
                                   : nullptr),
      last_evict_step_(std::numeric_limits<int64_t>::min()) {
  const AdmissionOptions& admission = options.admission;
  int64_t chunk_bytes = kChunkBytes;
  if (disk_ != nullptr) {
    chunk_bytes = std::clamp(shard_budget_bytes_ / kChunksPerShardBudget,
                             stride_floats_ * int64_t{4}, kChunkBytes);
  }
  const EvictionPolicy::Kind policy_kind = PolicyKind(options, disk_ != nullptr);
  shards_.reserve(num_shards_);
  for (int s = 0; s < num_shards_; ++s) {
    std::unique_ptr<CountMinSketch> sketch;
    if (admission.kind == AdmissionOptions::Kind::kFrequency) {
      // The shards split the table's counters between them.
      const int64_t width = (admission.sketch_width + num_shards_ - 1) / num_shards_;
      sketch = std::make_unique<CountMinSketch>(width, admission.sketch_depth,
                                                HashCombine(options.seed, kSketchSalt));
    }
    const EvictionPolicy policy(policy_kind, row_floats_ + kEpochFloats, meta_offset_,
                                HashCombine(HashCombine(options.seed, kPolicySalt), s));
    shards_.push_back(std::make_unique<Shard>(stride_floats_, chunk_bytes, chunk_pool_.get(),
                                              std::move(sketch), policy));
  }
  if (disk_ == nullptr) return;
  // Loader i serves shards i, i + n, ...: no more loaders than shards.
  const int loaders = std::min(options.prefetch_threads, num_shards_);
  for (int i = 0; i < loaders; ++i) loaders_.push_back(std::make_unique<PrefetchLoader>());
  for (int i = 0; i < loaders; ++i) {
    loaders_[i]->thread = std::thread([this, i] { PrefetchLoop(i); });
  }
}

MemoryTable::~MemoryTable() {
  if (loaders_.empty()) return;
  {
    MutexLock lock(prefetch_mu_);
    prefetch_closed_ = true;
  }
  prefetch_cv_.NotifyAll();
  for (auto& loader : loaders_) loader->thread.join();
}

int64_t MemoryTable::TableOverheadBytes(int num_shards) {
  return static_cast<int64_t>(sizeof(MemoryTable)) + int64_t{num_shards} * sizeof(void*);
}

int64_t MemoryTable::MinShardBytes(const EmbeddingTableOptions& options) {
  const int64_t stride_bytes =
      4 * (StoredRowFloats(options) + kEpochFloats +
           EvictionPolicy::LinkFloats(PolicyKind(options, true)));
  // One row needs its chunk and the spare chunk the arena may keep (chunks
  // are one row at this budget), and the chunk table.
  return static_cast<int64_t>(sizeof(Shard)) + kMinIndexBytes + SketchBytesPerShard(options) +
         2 * stride_bytes + 4 * static_cast<int64_t>(sizeof(void*));
}

int64_t MemoryTable::CreateRow(Shard& shard, Key key, uint64_t hash, int64_t step) const {
  // Allocate first, so that a failure leaves index and arena consistent.
  shard.index.ReserveOneMore();
  shard.rows.ReserveOneMore();
  const int64_t slot = shard.rows.Append();
  float* row = shard.rows.row(slot);
  InitRowWeights(options_.seed, key, init_scale_, dim_, row);
  InitOptimizerState(options_.optimizer, dim_, row + dim_);
  WriteMeta(StoredMeta{key, step, 0}, row + meta_offset_);
  const uint32_t unmarked = 0;
  std::memcpy(row + row_floats_, &unmarked, sizeof(unmarked));
  shard.index.Insert(key, hash, slot);
  shard.policy.Inserted(shard.rows, slot);
  ++shard.counters.admitted;
  return slot;
}

int64_t MemoryTable::InsertRow(Shard& shard, Key key, uint64_t hash, const float* row) const {
  shard.index.ReserveOneMore();
  shard.rows.ReserveOneMore();
  const int64_t slot = shard.rows.Append();
  float* dst = shard.rows.row(slot);
  std::memcpy(dst, row, sizeof(float) * row_floats_);
  const uint32_t unmarked = 0;
  std::memcpy(dst + row_floats_, &unmarked, sizeof(unmarked));
  shard.index.Insert(key, hash, slot);
  shard.policy.Inserted(shard.rows, slot);
  return slot;
}

void MemoryTable::RemoveSlot(Shard& shard, int64_t slot) const {
  float* row = shard.rows.row(slot);
  const Key key = ReadMeta(row + meta_offset_).key;
  shard.policy.Removed(shard.rows, slot);
  shard.index.Erase(key, Mix64(key));
  const int64_t last = shard.rows.size() - 1;
  if (slot != last) {
    const float* last_row = shard.rows.row(last);
    const Key moved = ReadMeta(last_row + meta_offset_).key;
    std::memcpy(row, last_row, sizeof(float) * stride_floats_);
    shard.index.SetSlot(moved, Mix64(moved), slot);
    shard.policy.Moved(shard.rows, last, slot);
  }
  shard.rows.RemoveLast();
}

void MemoryTable::MarkChanged(Shard& shard, float* row) const {
  if (!options_.track_changes) return;
  float* epoch_float = row + row_floats_;
  uint32_t epoch;
  std::memcpy(&epoch, epoch_float, sizeof(epoch));
  if (epoch == shard.epoch) return;
  std::memcpy(epoch_float, &shard.epoch, sizeof(epoch));
  std::vector<Key>& changed = shard.changed;
  if (changed.size() == changed.capacity() && changed.size() >= 1024) {
    // A key is appended again after it left memory and came back; dedupe
    // before growing so that the list stays within twice the keys changed.
    std::sort(changed.begin(), changed.end());
    changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
  }
  changed.push_back(ReadMeta(row + meta_offset_).key);
}

bool MemoryTable::Admit(Shard& shard, Key key, Access access, int64_t step) const {
  const AdmissionOptions& admission = options_.admission;
  switch (admission.kind) {
    case AdmissionOptions::Kind::kNone:
      return true;
    case AdmissionOptions::Kind::kFrequency: {
      const uint32_t count =
          access == Access::kPull ? shard.sketch->Add(key) : shard.sketch->Estimate(key);
      return count >= admission.min_count;
    }
    case AdmissionOptions::Kind::kProbability:
      return access == Access::kPull &&
             UniformAt(admission_seed_, key, static_cast<uint64_t>(step)) < admission.probability;
  }
  return false;
}

Status MemoryTable::ResolveRows(Shard& shard, int s, Access access, int64_t step,
                                BatchScratch& batch) const {
  const int64_t begin = batch.begin[s];
  const int64_t end = batch.begin[s + 1];
  CountMinSketch* sketch = shard.sketch.get();
  if (disk_ == nullptr) {
    for (int64_t k = begin; k < end; ++k) {
      if (k + kPrefetchDistance < end) {
        shard.index.Prefetch(batch.hashes[k + kPrefetchDistance]);
        // Most lookups of a table with admission that is still filling miss;
        // their counters are read next.
        if (sketch != nullptr) sketch->Prefetch(batch.keys[k + kPrefetchDistance]);
      }
      const Key key = batch.keys[k];
      int64_t slot = shard.index.Find(key, batch.hashes[k]);
      if (slot < 0 && Admit(shard, key, access, step)) {
        slot = CreateRow(shard, key, batch.hashes[k], step);
        MarkChanged(shard, shard.rows.row(slot));
      }
      if (slot < 0) {
        ++(access == Access::kPull ? shard.counters.rejected : shard.counters.dropped);
        batch.rows[k] = nullptr;
        continue;
      }
      float* row = shard.rows.row(slot);
      // The caller's pass over the rows comes right after this one; a shard's
      // rows of one batch fit in L2, so start loading them now.
      __builtin_prefetch(row);
      batch.rows[k] = row;
    }
    return Status::OK();
  }
  // With a disk tier: find what memory holds, read the rest from disk in one
  // Get, and only then decide on creating rows, so that a row living on disk
  // is never created afresh. Rows never move while rows are added, so the
  // pointers of the first pass stay valid.
  ShardIo& io = batch.io[s];
  io.keys.clear();
  io.positions.clear();
  for (int64_t k = begin; k < end; ++k) {
    if (k + kPrefetchDistance < end) shard.index.Prefetch(batch.hashes[k + kPrefetchDistance]);
    const int64_t slot = shard.index.Find(batch.keys[k], batch.hashes[k]);
    if (slot < 0) {
      batch.rows[k] = nullptr;
      io.keys.push_back(batch.keys[k]);
      io.positions.push_back(k);
      continue;
    }
    shard.policy.Accessed(shard.rows, slot);
    batch.rows[k] = shard.rows.row(slot);
  }
  shard.counters.memory_hits += (end - begin) - static_cast<int64_t>(io.keys.size());
  if (io.keys.empty()) return Status::OK();
  EMBER_RETURN_IF_ERROR(LoadFromDisk(shard, access, io));
  const int64_t missing = static_cast<int64_t>(io.keys.size());
  for (int64_t i = 0; i < missing; ++i) {
    const int64_t k = io.positions[i];
    int64_t slot = io.slots[i];
    if (slot < 0 && Admit(shard, io.keys[i], access, step)) {
      slot = CreateRow(shard, io.keys[i], batch.hashes[k], step);
      MarkChanged(shard, shard.rows.row(slot));
    }
    if (slot < 0) {
      ++(access == Access::kPull ? shard.counters.rejected : shard.counters.dropped);
      continue;
    }
    batch.rows[k] = shard.rows.row(slot);
  }
  return Status::OK();
}

Status MemoryTable::TakePrefetchError() {
  // Acquire: pairs with the release in PrefetchLoop, so that the error is
  // set when the flag is seen (the mutex below orders it anyway).
  if (!has_prefetch_error_.load(std::memory_order_acquire)) return Status::OK();
  MutexLock lock(prefetch_mu_);
  Status error = std::move(prefetch_error_);
  prefetch_error_ = Status::OK();
  has_prefetch_error_.store(false, std::memory_order_relaxed);
  return error;
}

Status MemoryTable::Pull(const std::vector<Key>& keys, float* out) {
  if (keys.empty()) return Status::OK();
  if (out == nullptr) return Status::InvalidArgument("Pull: out is null for ", keys.size(), " keys");
  EMBER_RETURN_IF_ERROR(TakePrefetchError());
  std::unique_ptr<BatchScratch> batch = TakeKept(Kept::kPrepared, keys);
  if (batch != nullptr) {
    prepared_pulls_.fetch_add(1, std::memory_order_relaxed);
  } else {
    batch = TakeScratch();
    Group(keys, *batch);
  }
  const size_t row_bytes = sizeof(float) * dim_;
  const int64_t step = this->step();
  Status status = ForEachShard(*batch, [&](int s) -> Status {
    Shard& shard = *shards_[s];
    MutexLock lock(shard.mu);
    EMBER_RETURN_IF_ERROR(ResolveRows(shard, s, Access::kPull, step, *batch));
    batch->removals[s] = shard.rows.removals();
    batch->all_rows[s] = 1;
    // The Pull a Prefetch was for has come: its rows follow the policy again.
    if (!shard.pinned.empty()) Unpin(shard, s, *batch);
    const int64_t end = batch->begin[s + 1];
    for (int64_t k = batch->begin[s]; k < end; ++k) {
      if (k + kPrefetchDistance < end) __builtin_prefetch(batch->rows[k + kPrefetchDistance]);
      float* row = batch->rows[k];
      float* dst = out + batch->positions[k] * dim_;
      if (row == nullptr) {
        std::memset(dst, 0, row_bytes);
        batch->all_rows[s] = 0;
        continue;
      }
      std::memcpy(dst, row, row_bytes);
      TouchMeta(step, row + meta_offset_);
    }
    if (disk_ == nullptr) return Status::OK();
    return EnforceBudget(shard, batch->io[s]);
  });
  // Without a disk tier a Push of these keys can reuse this grouping and,
  // where no row moved since, these rows. With one, Push resolves again: it
  // touches the eviction policy and the tier statistics.
  if (status.ok() && disk_ == nullptr) {
    Keep(Kept::kResolvedPull, keys, std::move(batch));
  } else {
    ReturnScratch(std::move(batch));
  }
  return status;
}

Status MemoryTable::Push(const std::vector<Key>& keys, const float* grads) {
  if (keys.empty()) return Status::OK();
  if (grads == nullptr) {
    return Status::InvalidArgument("Push: grads is null for ", keys.size(), " keys");
  }
  EMBER_RETURN_IF_ERROR(TakePrefetchError());
  std::unique_ptr<BatchScratch> batch = TakeKept(Kept::kResolvedPull, keys);
  const bool pulled = batch != nullptr;
  if (!pulled) {
    batch = TakeScratch();
    Group(keys, *batch);
  }
  const SparseOptimizerOptions& optimizer = options_.optimizer;
  const int64_t step = this->step();
  Status status = ForEachShard(*batch, [&](int s) -> Status {
    Shard& shard = *shards_[s];
    MutexLock lock(shard.mu);
    // The Pull's rows hold when they all existed and none has moved since
    // (rows move only when a row is removed); else resolve as for any Push.
    if (!pulled || !batch->all_rows[s] || batch->removals[s] != shard.rows.removals()) {
      EMBER_RETURN_IF_ERROR(ResolveRows(shard, s, Access::kPush, step, *batch));
    }
    const int64_t end = batch->begin[s + 1];
    uint32_t epoch;
    for (int64_t k = batch->begin[s]; k < end; ++k) {
      if (k + kPrefetchDistance < end) __builtin_prefetch(batch->rows[k + kPrefetchDistance]);
      float* row = batch->rows[k];
      if (row == nullptr) continue;  // not admitted: the gradient is dropped
      ApplySparseOptimizer(optimizer, dim_, grads + batch->positions[k] * dim_, row, row + dim_);
      std::memcpy(&epoch, row + row_floats_, sizeof(epoch));
      if (epoch != shard.epoch) MarkChanged(shard, row);
    }
    if (disk_ == nullptr) return Status::OK();
    return EnforceBudget(shard, batch->io[s]);
  });
  ReturnScratch(std::move(batch));
  return status;
}

Status MemoryTable::Lookup(const std::vector<Key>& keys, float* out) {
  if (keys.empty()) return Status::OK();
  if (out == nullptr) {
    return Status::InvalidArgument("Lookup: out is null for ", keys.size(), " keys");
  }
  std::unique_ptr<BatchScratch> batch = TakeScratch();
  Group(keys, *batch);
  const size_t row_bytes = sizeof(float) * dim_;
  const bool admission = options_.admission.kind != AdmissionOptions::Kind::kNone;
  auto absent = [&](Key key, float* dst) {
    if (admission) {
      std::memset(dst, 0, row_bytes);
    } else {
      InitRowWeights(options_.seed, key, init_scale_, dim_, dst);
    }
  };
  Status status = ForEachShard(*batch, [&](int s) -> Status {
    Shard& shard = *shards_[s];
    MutexLock lock(shard.mu);
    ShardIo* io = SplitByTier(
        shard, s, *batch,
        [&](int64_t k, int64_t slot) {
          std::memcpy(out + batch->positions[k] * dim_, shard.rows.row(slot), row_bytes);
        },
        [&](int64_t k) { absent(batch->keys[k], out + batch->positions[k] * dim_); });
    if (io == nullptr || io->keys.empty()) return Status::OK();
    EMBER_RETURN_IF_ERROR(ReadDiskRows(*io));
    const size_t stored_bytes = sizeof(float) * row_floats_;
    for (size_t i = 0; i < io->keys.size(); ++i) {
      float* dst = out + batch->positions[io->positions[i]] * dim_;
      if (io->slots[i] < 0) {
        absent(io->keys[i], dst);
      } else {
        std::memcpy(dst, io->rows.data() + i * stored_bytes, row_bytes);
      }
    }
    return Status::OK();
  });
  ReturnScratch(std::move(batch));
  return status;
}

int64_t MemoryTable::EvictShard(Shard& shard, int64_t step) const {
  MutexLock lock(shard.mu);
  int64_t evicted = 0;
  int64_t slot = 0;
  std::vector<Key> expired;
  while (slot < shard.rows.size()) {
    const StoredMeta meta = ReadMeta(shard.rows.row(slot) + meta_offset_);
    if (step - meta.last_seen_step <= options_.ttl_steps) {
      ++slot;
      continue;
    }
    // The slot is examined again: it now holds the shard's last row.
    RemoveSlot(shard, slot);
    if (options_.track_changes) shard.removed.push_back(meta.key);
    if (disk_ != nullptr) expired.push_back(meta.key);
    ++evicted;
  }
  if (evicted > 0) shard.index.ShrinkIfSparse();
  shard.counters.evicted += evicted;
  if (!expired.empty()) {
    // The rows may have stale copies on disk (see LoadFromDisk). A copy is
    // older than its memory row, so it reads as expired from now on anyway;
    // deleting it keeps disk_rows exact and the disk small.
    ++shard.disk_version;
    Status deleted = disk_->Delete(expired);
    if (!deleted.ok()) {
      LOG_EVERY_N(WARNING, 100) << "TTL eviction: cannot delete " << expired.size()
                                << " stale rows from the disk tier: " << deleted;
      // Counted as expired rows on disk not yet looked at (an upper bound:
      // some of the keys may have had no copy).
      shard.counters.disk_rows += static_cast<int64_t>(expired.size());
    }
  }
  return evicted;
}

int64_t MemoryTable::EvictExpired() { return EvictExpiredAt(this->step()); }

int64_t MemoryTable::eviction_step() const {
  const int64_t step = last_evict_step_.load(std::memory_order_relaxed);
  return step == std::numeric_limits<int64_t>::min() ? -1 : step;
}

void MemoryTable::RestoreEvictionStep(int64_t step) {
  if (step >= 0) EvictExpiredAt(step);
}

int64_t MemoryTable::EvictExpiredAt(int64_t step) {
  if (options_.ttl_steps == 0) return 0;
  // Before any shard is locked: a Prefetch that loads a row after its shard
  // was swept must see this step (see last_evict_step_).
  last_evict_step_.store(step, std::memory_order_relaxed);
  std::vector<int64_t> evicted(num_shards_, 0);
  ParallelFor(0, num_shards_, 1, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) evicted[s] = EvictShard(*shards_[s], step);
  });
  int64_t total = 0;
  for (int64_t count : evicted) total += count;
  return total;
}

std::optional<RowMeta> MemoryTable::row_meta(Key key) const {
  const uint64_t hash = Mix64(key);
  const Shard& shard = *shards_[hash % static_cast<uint64_t>(num_shards_)];
  MutexLock lock(shard.mu);
  const int64_t slot = shard.index.Find(key, hash);
  if (slot >= 0) {
    const StoredMeta meta = ReadMeta(shard.rows.row(slot) + meta_offset_);
    return RowMeta{meta.frequency, meta.last_seen_step};
  }
  if (disk_ == nullptr) return std::nullopt;
  ShardIo io;
  io.keys.push_back(key);
  if (!ReadDiskRows(io).ok() || io.slots[0] < 0) return std::nullopt;
  const StoredMeta meta =
      ReadMeta(reinterpret_cast<const float*>(io.rows.data()) + meta_offset_);
  return RowMeta{meta.frequency, meta.last_seen_step};
}

int64_t MemoryTable::ShardBytes(const Shard& shard) const {
  return static_cast<int64_t>(sizeof(Shard)) + shard.index.bytes() + shard.rows.bytes() +
         (shard.sketch != nullptr ? shard.sketch->bytes() : 0);
}

int64_t MemoryTable::num_rows() const {
  int64_t rows = 0;
  for (const auto& shard : shards_) {
    MutexLock lock(shard->mu);
    rows += shard->index.size() + shard->counters.disk_rows;
  }
  return rows;
}

Status MemoryTable::Reserve(int64_t rows) {
  if (rows < 0) return Status::InvalidArgument("Reserve: rows must be >= 0, got ", rows);
  if (chunk_pool_ == nullptr) return Status::OK();  // The disk tier keeps to its budget.
  const int64_t more = rows - num_rows();
  if (more <= 0) return Status::OK();
  const int64_t rows_per_chunk = chunk_pool_->chunk_bytes() / (stride_floats_ * 4);
  // A shard's new rows fill the rest of its last chunk, then whole chunks:
  // at most one chunk per shard beyond what the rows fill.
  const int64_t chunks = (more + rows_per_chunk - 1) / rows_per_chunk + num_shards_;
  // Each shard's share of the keys, and 4 standard deviations of the spread
  // of a hash partition above it.
  const double share = static_cast<double>(more) / num_shards_;
  const int64_t shard_keys = static_cast<int64_t>(std::ceil(share + 4 * std::sqrt(share)));
  // An index entry is 16 bytes at a load of 0.35 to 0.7: at most ~46 bytes.
  const double bytes =
      static_cast<double>(chunks) * static_cast<double>(chunk_pool_->chunk_bytes()) +
      static_cast<double>(shard_keys) * num_shards_ * 46.0;
  const int64_t available = AvailableMemoryBytes();
  if (available >= 0 && bytes > static_cast<double>(available)) {
    return Status::ResourceExhausted("room for ", more, " more embedding rows needs ",
                                     std::llround(bytes / (1 << 20)), " MiB, ", available >> 20,
                                     " MiB are available");
  }
  if (!chunk_pool_->Reserve(chunks)) {
    return Status::ResourceExhausted("could not allocate ", std::llround(bytes / (1 << 20)),
                                     " MiB for ", more, " more embedding rows");
  }
  for (const auto& shard : shards_) {
    MutexLock lock(shard->mu);
    try {
      shard->index.Reserve(shard->index.size() + shard_keys);
      shard->rows.ReserveChunkList(shard->rows.size() + shard_keys);
    } catch (const std::bad_alloc&) {
      return Status::ResourceExhausted("could not grow the key index for ", more,
                                       " more embedding rows");
    }
  }
  return Status::OK();
}

int64_t MemoryTable::memory_bytes() const {
  int64_t bytes = TableOverheadBytes(num_shards_);
  if (chunk_pool_ != nullptr) bytes += chunk_pool_->idle_bytes();
  for (const auto& shard : shards_) {
    MutexLock lock(shard->mu);
    bytes += ShardBytes(*shard);
  }
  return bytes;
}

TableStats MemoryTable::stats() const {
  TableStats stats;
  stats.memory_bytes = TableOverheadBytes(num_shards_);
  if (chunk_pool_ != nullptr) stats.memory_bytes += chunk_pool_->idle_bytes();
  stats.prepared_pulls = prepared_pulls_.load(std::memory_order_relaxed);
  for (const auto& shard : shards_) {
    MutexLock lock(shard->mu);
    const ShardCounters& c = shard->counters;
    stats.rows += shard->index.size() + c.disk_rows;
    stats.memory_bytes += ShardBytes(*shard);
    stats.admitted_keys += c.admitted;
    stats.rejected_keys += c.rejected;
    stats.dropped_gradients += c.dropped;
    stats.evicted_rows += c.evicted;
    if (disk_ == nullptr) continue;
    stats.memory_rows += shard->index.size();
    stats.disk_rows += c.disk_rows;
    stats.memory_hits += c.memory_hits;
    stats.disk_hits += c.disk_hits;
    stats.prefetched_rows += c.prefetched;
    stats.spilled_rows += c.spilled;
    stats.disk_reads += c.disk_reads;
    stats.disk_writes += c.disk_writes;
  }
  return stats;
}

namespace {

Status ValidateAdmissionOptions(const AdmissionOptions& admission) {
  switch (admission.kind) {
    case AdmissionOptions::Kind::kNone:
      return Status::OK();
    case AdmissionOptions::Kind::kFrequency:
      if (admission.min_count < 1 || admission.min_count > std::numeric_limits<uint32_t>::max()) {
        return Status::InvalidArgument("admission.min_count must be in [1, 2^32 - 1], got ",
                                       admission.min_count);
      }
      if (admission.sketch_width < 1 || admission.sketch_width > (int64_t{1} << 32)) {
        return Status::InvalidArgument("admission.sketch_width must be in [1, 2^32], got ",
                                       admission.sketch_width);
      }
      if (admission.sketch_depth < 1 || admission.sketch_depth > 16) {
        return Status::InvalidArgument("admission.sketch_depth must be in [1, 16], got ",
                                       admission.sketch_depth);
      }
      return Status::OK();
    case AdmissionOptions::Kind::kProbability:
      // Written as !(p > 0) so that NaN is rejected too.
      if (!(admission.probability > 0.0) || !(admission.probability <= 1.0)) {
        return Status::InvalidArgument("admission.probability must be in (0, 1], got ",
                                       admission.probability);
      }
      return Status::OK();
  }
  return Status::InvalidArgument("admission.kind: unknown kind ", static_cast<int>(admission.kind));
}

Status ValidateTableOptions(const EmbeddingTableOptions& options) {
  if (options.dim < 1 || options.dim > kMaxDim) {
    return Status::InvalidArgument("dim must be in [1, ", kMaxDim, "], got ", options.dim);
  }
  if (options.num_shards < 1 || options.num_shards > kMaxShards) {
    return Status::InvalidArgument("num_shards must be in [1, ", kMaxShards, "], got ",
                                   options.num_shards);
  }
  if (!std::isfinite(options.init_scale)) {
    return Status::InvalidArgument("init_scale must be finite, got ", options.init_scale);
  }
  if (options.ttl_steps < 0) {
    return Status::InvalidArgument("ttl_steps must be >= 0, got ", options.ttl_steps);
  }
  if (options.prefetch_threads < 1 || options.prefetch_threads > 64) {
    return Status::InvalidArgument("prefetch_threads must be in [1, 64], got ",
                                   options.prefetch_threads);
  }
  if (options.memory_budget_bytes < 0) {
    return Status::InvalidArgument("memory_budget_bytes must be >= 0, got ",
                                   options.memory_budget_bytes);
  }
  EMBER_RETURN_IF_ERROR(ValidateAdmissionOptions(options.admission));
  return ValidateSparseOptimizerOptions(options.optimizer);
}

// The checks of a tiered table's options beyond ValidateTableOptions.
Status ValidateTieredOptions(const EmbeddingTableOptions& options) {
  const int64_t minimum = MemoryTable::TableOverheadBytes(options.num_shards) +
                          options.num_shards * MemoryTable::MinShardBytes(options);
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

Result<std::unique_ptr<EmbeddingTable>> NewMemoryTable(const EmbeddingTableOptions& options) {
  EMBER_RETURN_IF_ERROR(internal::ValidateTableOptions(options));
  if (options.memory_budget_bytes != 0) {
    return Status::InvalidArgument("NewMemoryTable: memory_budget_bytes must be 0, got ",
                                   options.memory_budget_bytes,
                                   "; use NewEmbeddingTable for a table with a disk tier");
  }
  try {
    return std::unique_ptr<EmbeddingTable>(
        std::make_unique<internal::MemoryTable>(options, nullptr));
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("embedding table: out of memory creating ",
                                     options.num_shards, " shards");
  }
}

Result<std::unique_ptr<EmbeddingTable>> NewTieredTable(const EmbeddingTableOptions& options,
                                                       std::unique_ptr<Tier> disk) {
  EMBER_RETURN_IF_ERROR(internal::ValidateTableOptions(options));
  if (options.memory_budget_bytes == 0) {
    return Status::InvalidArgument("NewTieredTable: memory_budget_bytes must be > 0");
  }
  EMBER_RETURN_IF_ERROR(internal::ValidateTieredOptions(options));
  if (disk == nullptr) return Status::InvalidArgument("NewTieredTable: disk tier is null");
  const int64_t row_bytes = internal::StoredRowFloats(options) * int64_t{sizeof(float)};
  if (disk->row_bytes() != row_bytes) {
    return Status::InvalidArgument("NewTieredTable: disk tier rows have ", disk->row_bytes(),
                                   " bytes, the table's have ", row_bytes);
  }
  try {
    return std::unique_ptr<EmbeddingTable>(
        std::make_unique<internal::MemoryTable>(options, std::move(disk)));
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("embedding table: out of memory creating ",
                                     options.num_shards, " shards");
  }
}

Result<std::unique_ptr<EmbeddingTable>> NewEmbeddingTable(const EmbeddingTableOptions& options) {
  if (options.memory_budget_bytes == 0) return NewMemoryTable(options);
  EMBER_RETURN_IF_ERROR(internal::ValidateTableOptions(options));
  EMBER_RETURN_IF_ERROR(internal::ValidateTieredOptions(options));
  if (options.disk_path.empty()) {
    return Status::InvalidArgument(
        "disk_path is required when memory_budget_bytes > 0 (the disk tier's directory)");
  }
  RocksDbTierOptions disk_options;
  disk_options.path = options.disk_path;
  disk_options.row_bytes = internal::StoredRowFloats(options) * int64_t{sizeof(float)};
  disk_options.block_cache_bytes = options.disk_block_cache_bytes;
  disk_options.write_buffer_bytes = options.disk_write_buffer_bytes;
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
