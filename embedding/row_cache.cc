// RowCache: creating, resolving, reading and updating rows, TTL and
// statistics (see embedding/internal/row_cache.h for the contract and
// embedding/internal/memory_shard.h for the layout).
//
// A batch is grouped by shard in one counting-sort pass; then each shard,
// under its own lock taken once per batch, resolves its keys to rows (the
// index lookups prefetched a few keys ahead) and copies or updates them (the
// rows prefetched a few keys ahead). Shards run in parallel in the caller's
// arena; there is no cache-wide lock.

#include "embedding/internal/row_cache.h"

#include <algorithm>
#include <atomic>
#include <bit>
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
#include "embedding/internal/row_weights.h"
#include "embedding/row_init.h"
#include "embedding/sparse_optimizer.h"

namespace ember::embedding::internal {
namespace {

// Target bytes of one chunk of the row arena.
constexpr int64_t kChunkBytes = int64_t{64} << 10;
// With a budget, chunks are at most this fraction of a shard's budget, so
// that the arena's granularity (and its one spare chunk) costs little of it.
constexpr int64_t kChunksPerShardBudget = 16;
// Keys looked ahead when prefetching index buckets and rows.
constexpr int64_t kPrefetchDistance = 16;
// Weights a new bfloat16 row is initialised in on the stack (more: heap).
constexpr int kMaxStackWeights = 256;
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

bool Budgeted(const EmbeddingTableOptions& options) { return options.memory_budget_bytes > 0; }

EvictionPolicy::Kind PolicyKind(const EmbeddingTableOptions& options, bool budgeted) {
  if (!budgeted) return EvictionPolicy::Kind::kNone;
  return options.eviction_policy == EmbeddingTableOptions::EvictionPolicy::kLfu
             ? EvictionPolicy::Kind::kLfu
             : EvictionPolicy::Kind::kLru;
}

int64_t StrideFloats(const EmbeddingTableOptions& options, bool budgeted) {
  return RowCache::RowFloats(options) + kEpochFloats +
         EvictionPolicy::LinkFloats(PolicyKind(options, budgeted));
}

int64_t SketchBytesPerShard(const EmbeddingTableOptions& options) {
  const AdmissionOptions& admission = options.admission;
  if (admission.kind != AdmissionOptions::Kind::kFrequency) return 0;
  const int64_t width = (admission.sketch_width + options.num_shards - 1) / options.num_shards;
  return static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(width))) *
         admission.sketch_depth * static_cast<int64_t>(sizeof(uint32_t));
}

int64_t ShardBudgetBytes(const RowCacheOptions& options) {
  if (!Budgeted(options.table)) return 0;
  return (options.table.memory_budget_bytes - options.overhead_bytes) / options.table.num_shards;
}

}  // namespace

int64_t RowCache::RowFloats(const EmbeddingTableOptions& options) {
  return WeightWords(options.weight_storage, options.dim) +
         StateFloatsPerRow(options.optimizer.type, options.dim) + kMetaFloats;
}

int64_t RowCache::StoredRowFloats(const EmbeddingTableOptions& options) {
  return options.dim + StateFloatsPerRow(options.optimizer.type, options.dim) + kMetaFloats;
}

int64_t RowCache::MinShardBytes(const EmbeddingTableOptions& options) {
  const int64_t stride_bytes = 4 * StrideFloats(options, /*budgeted=*/true);
  // One row needs its chunk and the spare chunk the arena may keep (chunks
  // are one row at this budget), and the chunk table.
  return static_cast<int64_t>(sizeof(Shard)) + kMinIndexBytes + SketchBytesPerShard(options) +
         2 * stride_bytes + 4 * static_cast<int64_t>(sizeof(void*));
}

RowCache::RowCache(const RowCacheOptions& options)
    : options_(options.table),
      dim_(options_.dim),
      num_shards_(options_.num_shards),
      weight_words_(WeightWords(options_.weight_storage, options_.dim)),
      meta_offset_(weight_words_ + StateFloatsPerRow(options_.optimizer.type, options_.dim)),
      row_floats_(meta_offset_ + kMetaFloats),
      stored_row_floats_(StoredRowFloats(options_)),
      stride_floats_(StrideFloats(options_, Budgeted(options_))),
      init_scale_(InitScale(options_)),
      admission_seed_(HashCombine(options_.seed, kProbabilitySalt)),
      overhead_bytes_(options.overhead_bytes),
      budget_(ShardBudgetBytes(options), stride_floats_, meta_offset_),
      chunk_pool_(Budgeted(options_) ? nullptr
                                     : std::make_unique<ChunkPool>(
                                           RowArena::ChunkBytesFor(stride_floats_, kChunkBytes))),
      batches_(options_.num_shards, options.io_chunk_rows > 0,
               2 * options.io_chunk_rows * int64_t{sizeof(float)} * row_floats_) {
  const AdmissionOptions& admission = options_.admission;
  int64_t chunk_bytes = kChunkBytes;
  if (Budgeted(options_)) {
    chunk_bytes = std::clamp(budget_.shard_budget_bytes() / kChunksPerShardBudget,
                             stride_floats_ * int64_t{4}, kChunkBytes);
  }
  const EvictionPolicy::Kind policy_kind = PolicyKind(options_, Budgeted(options_));
  shards_.reserve(num_shards_);
  for (int s = 0; s < num_shards_; ++s) {
    std::unique_ptr<CountMinSketch> sketch;
    if (admission.kind == AdmissionOptions::Kind::kFrequency) {
      // The shards split the table's counters between them.
      const int64_t width = (admission.sketch_width + num_shards_ - 1) / num_shards_;
      sketch = std::make_unique<CountMinSketch>(width, admission.sketch_depth,
                                                HashCombine(options_.seed, kSketchSalt));
    }
    const EvictionPolicy policy(policy_kind, row_floats_ + kEpochFloats, meta_offset_,
                                HashCombine(HashCombine(options_.seed, kPolicySalt), s));
    shards_.push_back(std::make_unique<Shard>(stride_floats_, chunk_bytes, chunk_pool_.get(),
                                              std::move(sketch), policy));
  }
}

void RowCache::LoadRowWeights(const float* row, float* out) const {
  LoadWeights(options_.weight_storage, dim_, row, out);
}

// The weights convert (a copy for float storage); state and RowMeta copy.
// `row` may be a row of the tier behind, read into bytes at a multiple of 4
// bytes: the 16-bit weights need 2-byte alignment only.
void RowCache::ExpandRow(const float* row, float* stored) const {
  LoadWeights(options_.weight_storage, dim_, row, stored);
  std::memcpy(stored + dim_, row + weight_words_, sizeof(float) * (row_floats_ - weight_words_));
}

void RowCache::CompactRow(const float* stored, float* row) const {
  StoreWeights(options_.weight_storage, dim_, stored, row);
  std::memcpy(row + weight_words_, stored + dim_, sizeof(float) * (row_floats_ - weight_words_));
}

int64_t RowCache::CreateRow(Shard& shard, Key key, uint64_t hash, int64_t step) const {
  // Allocate first, so that a failure leaves index and arena consistent.
  shard.index.ReserveOneMore();
  shard.rows.ReserveOneMore();
  const int64_t slot = shard.rows.Append();
  float* row = shard.rows.row(slot);
  if (weight_words_ == dim_) {
    InitRowWeights(options_.seed, key, init_scale_, dim_, row);
  } else {
    float weights[kMaxStackWeights];
    std::vector<float> heap;
    float* initial = dim_ <= kMaxStackWeights ? weights : (heap.resize(dim_), heap.data());
    InitRowWeights(options_.seed, key, init_scale_, dim_, initial);
    StoreWeights(options_.weight_storage, dim_, initial, row);
  }
  InitOptimizerState(options_.optimizer, dim_, row + weight_words_);
  WriteMeta(StoredMeta{key, step, 0}, row + meta_offset_);
  const uint32_t unmarked = 0;
  std::memcpy(row + row_floats_, &unmarked, sizeof(unmarked));
  shard.index.Insert(key, hash, slot);
  shard.policy.Inserted(shard.rows, slot);
  ++shard.counters.admitted;
  return slot;
}

int64_t RowCache::InsertRow(Shard& shard, Key key, uint64_t hash, const float* row) const {
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

void RowCache::RemoveSlot(Shard& shard, int64_t slot) const {
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

void RowCache::WriteRow(Shard& shard, int64_t slot, Key key, uint64_t hash,
                          const float* row) const {
  // A new row's slot takes a copy of the first row_floats() floats first
  // (a stored row is at least that long), then the held form.
  float* dst = shard.rows.row(slot < 0 ? InsertRow(shard, key, hash, row) : slot);
  CompactRow(row, dst);
  StoredMeta meta = ReadMeta(dst + meta_offset_);
  meta.key = key;  // the row's key is the caller's, whatever the row says
  WriteMeta(meta, dst + meta_offset_);
  MarkChanged(shard, dst);
}

void RowCache::MarkChanged(Shard& shard, float* row) const {
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

void RowCache::RecordChanged(Shard& shard, const std::vector<Key>& keys) const {
  if (options_.track_changes) shard.changed.insert(shard.changed.end(), keys.begin(), keys.end());
}

void RowCache::RecordRemoved(Shard& shard, const std::vector<Key>& keys) const {
  if (options_.track_changes) shard.removed.insert(shard.removed.end(), keys.begin(), keys.end());
}

void RowCache::RecordRemoved(Shard& shard, Key key) const {
  if (options_.track_changes) shard.removed.push_back(key);
}

bool RowCache::Admit(Shard& shard, Key key, Access access, int64_t step) const {
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

int64_t RowCache::CreateIfAdmitted(Shard& shard, Key key, uint64_t hash, Access access,
                                     int64_t step) const {
  if (!Admit(shard, key, access, step)) {
    ++(access == Access::kPull ? shard.counters.rejected : shard.counters.dropped);
    return -1;
  }
  const int64_t slot = CreateRow(shard, key, hash, step);
  MarkChanged(shard, shard.rows.row(slot));
  return slot;
}

void RowCache::ResolveRows(Shard& shard, int s, Access access, int64_t step,
                             BatchScratch& batch) const {
  const int64_t begin = batch.begin[s];
  const int64_t end = batch.begin[s + 1];
  CountMinSketch* sketch = shard.sketch.get();
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
}

void RowCache::FindResident(Shard& shard, int s, BatchScratch& batch, ShardIo& missing) const {
  const int64_t begin = batch.begin[s];
  const int64_t end = batch.begin[s + 1];
  missing.keys.clear();
  missing.positions.clear();
  for (int64_t k = begin; k < end; ++k) {
    if (k + kPrefetchDistance < end) shard.index.Prefetch(batch.hashes[k + kPrefetchDistance]);
    const int64_t slot = shard.index.Find(batch.keys[k], batch.hashes[k]);
    if (slot < 0) {
      batch.rows[k] = nullptr;
      missing.keys.push_back(batch.keys[k]);
      missing.positions.push_back(k);
      continue;
    }
    shard.policy.Accessed(shard.rows, slot);
    batch.rows[k] = shard.rows.row(slot);
  }
}

void RowCache::CopyOut(Shard& shard, int s, BatchScratch& batch, int64_t step, float* out) const {
  batch.removals[s] = shard.rows.removals();
  batch.all_rows[s] = 1;
  const size_t row_bytes = sizeof(float) * dim_;
  const int64_t end = batch.begin[s + 1];
  for (int64_t k = batch.begin[s]; k < end; ++k) {
    if (k + kPrefetchDistance < end) __builtin_prefetch(batch.rows[k + kPrefetchDistance]);
    float* row = batch.rows[k];
    float* dst = out + batch.positions[k] * dim_;
    if (row == nullptr) {
      std::memset(dst, 0, row_bytes);
      batch.all_rows[s] = 0;
      continue;
    }
    LoadRowWeights(row, dst);
    TouchMeta(step, row + meta_offset_);
  }
}

void RowCache::ApplyGradients(Shard& shard, int s, const BatchScratch& batch,
                                const float* grads) const {
  const SparseOptimizerOptions& optimizer = options_.optimizer;
  const WeightStorage storage = options_.weight_storage;
  // Under bfloat16 storage the optimizer updates float weights, which are
  // then rounded back into the row.
  std::vector<float> widened(storage == WeightStorage::kFloat32 ? 0 : dim_);
  const int64_t end = batch.begin[s + 1];
  uint32_t epoch;
  for (int64_t k = batch.begin[s]; k < end; ++k) {
    if (k + kPrefetchDistance < end) __builtin_prefetch(batch.rows[k + kPrefetchDistance]);
    float* row = batch.rows[k];
    if (row == nullptr) continue;  // not admitted: the gradient is dropped
    const float* grad = grads + batch.positions[k] * dim_;
    if (storage == WeightStorage::kFloat32) {
      ApplySparseOptimizer(optimizer, dim_, grad, row, row + weight_words_);
    } else {
      LoadWeights(storage, dim_, row, widened.data());
      ApplySparseOptimizer(optimizer, dim_, grad, widened.data(), row + weight_words_);
      StoreUpdatedWeights(storage, dim_, widened.data(), batch.hashes[k], row);
    }
    std::memcpy(&epoch, row + row_floats_, sizeof(epoch));
    if (epoch != shard.epoch) MarkChanged(shard, row);
  }
}

std::optional<RowMeta> RowCache::ResidentMeta(const Shard& shard, Key key, uint64_t hash) const {
  const int64_t slot = shard.index.Find(key, hash);
  if (slot < 0) return std::nullopt;
  const StoredMeta meta = ReadMeta(shard.rows.row(slot) + meta_offset_);
  return RowMeta{meta.frequency, meta.last_seen_step};
}

void RowCache::ReadAbsent(Key key, float* dst) const {
  if (options_.admission.kind != AdmissionOptions::Kind::kNone) {
    std::memset(dst, 0, sizeof(float) * dim_);
  } else {
    InitRowWeights(options_.seed, key, init_scale_, dim_, dst);
    // As a row created now would hold them.
    RoundWeights(options_.weight_storage, dim_, dst);
  }
}

int64_t RowCache::EvictShard(Shard& shard, int64_t step, const ExpiredFn& on_expired) const {
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
    RecordRemoved(shard, meta.key);
    if (on_expired) expired.push_back(meta.key);
    ++evicted;
  }
  if (evicted > 0) shard.index.ShrinkIfSparse();
  shard.counters.evicted += evicted;
  if (!expired.empty()) on_expired(shard, expired);
  return evicted;
}

int64_t RowCache::EvictExpiredAt(int64_t step, const ExpiredFn& on_expired) {
  if (options_.ttl_steps == 0) return 0;
  // Before any shard is locked: a reader that loads a row from the tier
  // behind after its shard was swept must see this step.
  last_evict_step_.store(step, std::memory_order_relaxed);
  std::vector<int64_t> evicted(num_shards_, 0);
  ParallelFor(0, num_shards_, 1, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) evicted[s] = EvictShard(*shards_[s], step, on_expired);
  });
  int64_t total = 0;
  for (int64_t count : evicted) total += count;
  return total;
}

int64_t RowCache::num_rows() const {
  int64_t rows = 0;
  for (const auto& shard : shards_) {
    MutexLock lock(shard->mu);
    rows += shard->index.size();
  }
  return rows;
}

int64_t RowCache::memory_bytes() const {
  int64_t bytes = overhead_bytes_;
  if (chunk_pool_ != nullptr) bytes += chunk_pool_->idle_bytes();
  for (const auto& shard : shards_) {
    MutexLock lock(shard->mu);
    bytes += ShardBytes(*shard);
  }
  return bytes;
}

TableStats RowCache::BaseStats() const {
  TableStats stats;
  stats.memory_bytes = overhead_bytes_;
  if (chunk_pool_ != nullptr) stats.memory_bytes += chunk_pool_->idle_bytes();
  stats.prepared_pulls = batches_.prepared_pulls();
  stats.scratch_bytes = batches_.bytes();
  return stats;
}

void RowCache::AddShardStats(const Shard& shard, TableStats* stats) const {
  const MemoryCounters& c = shard.counters;
  stats->rows += shard.index.size();
  stats->memory_bytes += ShardBytes(shard);
  stats->admitted_keys += c.admitted;
  stats->rejected_keys += c.rejected;
  stats->dropped_gradients += c.dropped;
  stats->evicted_rows += c.evicted;
}

Status RowCache::Reserve(int64_t rows) {
  if (rows < 0) return Status::InvalidArgument("Reserve: rows must be >= 0, got ", rows);
  if (chunk_pool_ == nullptr) return Status::OK();  // A budget holds the rows to it.
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

}  // namespace ember::embedding::internal
