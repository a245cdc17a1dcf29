// NewMemoryTable: the in-memory EmbeddingTable.
//
// Keys are spread over shards by Mix64(key) % num_shards. A shard is a mutex,
// a flat open-addressing index (key -> slot, linear probing), an arena of
// rows in fixed-size chunks, so that growing never moves a row, and, with
// frequency admission, its own count-min sketch (the shard's keys are the
// only ones it counts, and it is updated under the shard's lock in batch
// order, so its counts do not depend on thread count). A row is
//
//   [dim weights][optimizer state][key: 2][last_seen_step: 2][frequency: 1]
//
// floats, the last three bit-copied integers (RowMeta): metadata lives in
// the row, whose cache line Pull touches anyway, and the key lets eviction
// walk the arena and move rows. Eviction fills each hole with the shard's
// last row, so slots stay dense and emptied chunks are freed.
//
// A batch is grouped by shard in one counting-sort pass; then each shard,
// under its own lock taken once per batch, resolves its keys to rows (the
// index lookups prefetched a few keys ahead) and copies or updates them (the
// rows prefetched a few keys ahead). Shards run in parallel in the caller's
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

#include "core/mutex.h"
#include "core/random.h"
#include "core/status.h"
#include "core/threads.h"
#include "embedding/embedding_table.h"
#include "embedding/internal/count_min_sketch.h"
#include "embedding/internal/row_store.h"
#include "embedding/row_init.h"
#include "embedding/sparse_optimizer.h"

namespace ember::embedding {
namespace {

// Upper bound on num_shards: beyond it a shard holds too little to be worth a
// mutex, and a typo (1e9) would otherwise allocate gigabytes of empty shards.
constexpr int kMaxShards = 1 << 16;
// Upper bound on dim, so that row sizes stay far from integer overflow.
constexpr int kMaxDim = 1 << 20;
// Target bytes of one chunk of the row arena.
constexpr int64_t kChunkBytes = int64_t{64} << 10;
// Keys looked ahead when prefetching index buckets and rows.
constexpr int64_t kPrefetchDistance = 16;
// Below this many keys a batch runs on the calling thread: scheduling tasks
// for mostly empty shards costs more than it saves.
constexpr int64_t kMinKeysForParallel = 2048;
// Floats of RowMeta at the end of a row: key (2), last_seen_step (2),
// frequency (1).
constexpr int64_t kMetaFloats = 5;
// Salts that keep the admission hashes independent of row initialisation.
constexpr uint64_t kSketchSalt = 0x5ce7c4a3b1d2e9f1ULL;
constexpr uint64_t kProbabilitySalt = 0x9a1b7e3cd4f20865ULL;

// The RowMeta of a row, at `meta` = row + dim + state floats. Bit-copied so
// that no float arithmetic ever touches the integers.
struct StoredMeta {
  Key key;
  int64_t last_seen_step;
  uint32_t frequency;
};
static_assert(sizeof(Key) + sizeof(int64_t) + sizeof(uint32_t) == kMetaFloats * sizeof(float));

StoredMeta ReadMeta(const float* meta) {
  StoredMeta m;
  std::memcpy(&m.key, meta, sizeof(m.key));
  std::memcpy(&m.last_seen_step, meta + 2, sizeof(m.last_seen_step));
  std::memcpy(&m.frequency, meta + 4, sizeof(m.frequency));
  return m;
}

void WriteMeta(const StoredMeta& m, float* meta) {
  std::memcpy(meta, &m.key, sizeof(m.key));
  std::memcpy(meta + 2, &m.last_seen_step, sizeof(m.last_seen_step));
  std::memcpy(meta + 4, &m.frequency, sizeof(m.frequency));
}

// Records a Pull at `step`: frequency + 1 (saturating), last seen = step.
void TouchMeta(int64_t step, float* meta) {
  uint32_t frequency;
  std::memcpy(&frequency, meta + 4, sizeof(frequency));
  if (frequency != std::numeric_limits<uint32_t>::max()) ++frequency;
  std::memcpy(meta + 2, &step, sizeof(step));
  std::memcpy(meta + 4, &frequency, sizeof(frequency));
}

// Thread safety: fields are guarded by mu. Aligned so that neighbouring
// shards' mutexes do not share a cache line.
struct alignas(64) Shard {
  Shard(int64_t row_floats, std::unique_ptr<CountMinSketch> sketch)
      : rows(row_floats, kChunkBytes), sketch(std::move(sketch)) {}

  mutable Mutex mu;
  KeyIndex index GUARDED_BY(mu);
  RowArena rows GUARDED_BY(mu);
  // Pulls of keys without a row; null unless admission is kFrequency.
  std::unique_ptr<CountMinSketch> sketch PT_GUARDED_BY(mu);
  int64_t admitted GUARDED_BY(mu) = 0;
  int64_t rejected GUARDED_BY(mu) = 0;
  int64_t dropped GUARDED_BY(mu) = 0;
  int64_t evicted GUARDED_BY(mu) = 0;
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
};

// Whether rows are resolved for a Pull (an occurrence for admission) or a Push.
enum class Access { kPull, kPush };

// Thread safety: all public methods may be called concurrently.
class MemoryTable final : public EmbeddingTable {
 public:
  explicit MemoryTable(const EmbeddingTableOptions& options)
      : options_(options),
        dim_(options.dim),
        num_shards_(options.num_shards),
        meta_offset_(options.dim + StateFloatsPerRow(options.optimizer.type, options.dim)),
        row_floats_(meta_offset_ + kMetaFloats),
        init_scale_(InitScale(options)),
        admission_seed_(HashCombine(options.seed, kProbabilitySalt)) {
    const AdmissionOptions& admission = options.admission;
    shards_.reserve(num_shards_);
    for (int s = 0; s < num_shards_; ++s) {
      std::unique_ptr<CountMinSketch> sketch;
      if (admission.kind == AdmissionOptions::Kind::kFrequency) {
        // The shards split the table's counters between them.
        const int64_t width = (admission.sketch_width + num_shards_ - 1) / num_shards_;
        sketch = std::make_unique<CountMinSketch>(width, admission.sketch_depth,
                                                  HashCombine(options.seed, kSketchSalt));
      }
      shards_.push_back(std::make_unique<Shard>(row_floats_, std::move(sketch)));
    }
  }
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
  std::optional<RowMeta> row_meta(Key key) const override;

  int dim() const override { return dim_; }
  int64_t num_rows() const override;
  int64_t memory_bytes() const override;
  TableStats stats() const override;

 private:
  // Fills `batch` with `keys` grouped by shard.
  void Group(const std::vector<Key>& keys, BatchScratch& batch) const;
  // Calls shard_fn(shard) for every shard with keys in `batch`, in parallel
  // when the batch is large enough. Returns ResourceExhausted if memory runs
  // out; rows created before that stay valid.
  template <typename ShardFn>
  Status ForEachShard(const BatchScratch& batch, const ShardFn& shard_fn) const;
  // Resolves the keys of shard `s` in `batch` to rows into batch.rows,
  // creating the rows of missing keys that are admitted (null for the others).
  void ResolveRows(Shard& shard, int s, Access access, int64_t step, BatchScratch& batch) const
      REQUIRES(shard.mu);
  // Whether `key`, which has no row, gets one now.
  bool Admit(Shard& shard, Key key, Access access, int64_t step) const REQUIRES(shard.mu);
  // Creates the row of `key`; returns its slot. May throw std::bad_alloc.
  int64_t CreateRow(Shard& shard, Key key, uint64_t hash, int64_t step) const
      REQUIRES(shard.mu);
  // Removes the rows of shard `shard` older than ttl_steps at `step`.
  int64_t EvictShard(Shard& shard, int64_t step) const;
  int64_t ShardBytes(const Shard& shard) const REQUIRES(shard.mu);

  std::unique_ptr<BatchScratch> TakeScratch();
  void ReturnScratch(std::unique_ptr<BatchScratch> scratch);

  const EmbeddingTableOptions options_;
  const int dim_;
  const int num_shards_;
  // Floats before the RowMeta of a row: weights and optimizer state.
  const int64_t meta_offset_;
  const int64_t row_floats_;
  const float init_scale_;
  const uint64_t admission_seed_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::atomic<int64_t> step_{0};

  // Scratch buffers kept between batches so that a steady stream of batches
  // allocates nothing. A pool rather than thread_local: a thread waiting in a
  // parallel loop may run another batch's task (oneTBB work stealing).
  Mutex scratch_mu_;
  std::vector<std::unique_ptr<BatchScratch>> free_scratch_ GUARDED_BY(scratch_mu_);
};

std::unique_ptr<BatchScratch> MemoryTable::TakeScratch() {
  {
    MutexLock lock(scratch_mu_);
    if (!free_scratch_.empty()) {
      std::unique_ptr<BatchScratch> scratch = std::move(free_scratch_.back());
      free_scratch_.pop_back();
      return scratch;
    }
  }
  return std::make_unique<BatchScratch>();
}

void MemoryTable::ReturnScratch(std::unique_ptr<BatchScratch> scratch) {
  MutexLock lock(scratch_mu_);
  free_scratch_.push_back(std::move(scratch));
}

void MemoryTable::Group(const std::vector<Key>& keys, BatchScratch& batch) const {
  const int64_t n = static_cast<int64_t>(keys.size());
  batch.begin.assign(num_shards_ + 1, 0);
  batch.shard_of.resize(n);
  batch.keys.resize(n);
  batch.hashes.resize(n);
  batch.positions.resize(n);
  batch.rows.resize(n);
  // Counting sort by shard; `begin` first holds counts shifted by one.
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t s = static_cast<uint32_t>(Mix64(keys[i]) % static_cast<uint64_t>(num_shards_));
    batch.shard_of[i] = s;
    ++batch.begin[s + 1];
  }
  for (int s = 0; s < num_shards_; ++s) batch.begin[s + 1] += batch.begin[s];
  // Fill from the back so that `begin` ends up as the start of each shard and
  // keys keep their batch order within a shard.
  for (int64_t i = n - 1; i >= 0; --i) {
    const int64_t k = --batch.begin[batch.shard_of[i] + 1];
    batch.keys[k] = keys[i];
    batch.hashes[k] = Mix64(keys[i]);
    batch.positions[k] = i;
  }
  // begin[s + 1] now holds the start of shard s; shift back by one.
  for (int s = 0; s < num_shards_; ++s) batch.begin[s] = batch.begin[s + 1];
  batch.begin[num_shards_] = n;
}

template <typename ShardFn>
Status MemoryTable::ForEachShard(const BatchScratch& batch, const ShardFn& shard_fn) const {
  const int64_t n = batch.begin[num_shards_];
  try {
    if (n < kMinKeysForParallel) {
      for (int s = 0; s < num_shards_; ++s) {
        if (batch.begin[s] < batch.begin[s + 1]) shard_fn(s);
      }
    } else {
      ParallelFor(0, num_shards_, 1, [&](int64_t begin, int64_t end) {
        for (int64_t s = begin; s < end; ++s) {
          if (batch.begin[s] < batch.begin[s + 1]) shard_fn(static_cast<int>(s));
        }
      });
    }
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("embedding table: out of memory creating rows (",
                                     num_rows(), " rows, ", memory_bytes(), " bytes held)");
  }
  return Status::OK();
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
  shard.index.Insert(key, hash, slot);
  ++shard.admitted;
  return slot;
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

void MemoryTable::ResolveRows(Shard& shard, int s, Access access, int64_t step,
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
    }
    if (slot < 0) {
      ++(access == Access::kPull ? shard.rejected : shard.dropped);
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

Status MemoryTable::Pull(const std::vector<Key>& keys, float* out) {
  if (keys.empty()) return Status::OK();
  if (out == nullptr) return Status::InvalidArgument("Pull: out is null for ", keys.size(), " keys");
  std::unique_ptr<BatchScratch> batch = TakeScratch();
  Group(keys, *batch);
  const size_t row_bytes = sizeof(float) * dim_;
  const int64_t step = this->step();
  Status status = ForEachShard(*batch, [&](int s) {
    Shard& shard = *shards_[s];
    MutexLock lock(shard.mu);
    ResolveRows(shard, s, Access::kPull, step, *batch);
    const int64_t end = batch->begin[s + 1];
    for (int64_t k = batch->begin[s]; k < end; ++k) {
      if (k + kPrefetchDistance < end) __builtin_prefetch(batch->rows[k + kPrefetchDistance]);
      float* row = batch->rows[k];
      float* dst = out + batch->positions[k] * dim_;
      if (row == nullptr) {
        std::memset(dst, 0, row_bytes);
        continue;
      }
      std::memcpy(dst, row, row_bytes);
      TouchMeta(step, row + meta_offset_);
    }
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
  Status status = ForEachShard(*batch, [&](int s) {
    Shard& shard = *shards_[s];
    MutexLock lock(shard.mu);
    const int64_t end = batch->begin[s + 1];
    for (int64_t k = batch->begin[s]; k < end; ++k) {
      const Key key = batch->keys[k];
      float* dst = out + batch->positions[k] * dim_;
      const int64_t slot = shard.index.Find(key, batch->hashes[k]);
      if (slot >= 0) {
        std::memcpy(dst, shard.rows.row(slot), row_bytes);
      } else if (admission) {
        std::memset(dst, 0, row_bytes);
      } else {
        InitRowWeights(options_.seed, key, init_scale_, dim_, dst);
      }
    }
  });
  ReturnScratch(std::move(batch));
  return status;
}

Status MemoryTable::Push(const std::vector<Key>& keys, const float* grads) {
  if (keys.empty()) return Status::OK();
  if (grads == nullptr) {
    return Status::InvalidArgument("Push: grads is null for ", keys.size(), " keys");
  }
  std::unique_ptr<BatchScratch> batch = TakeScratch();
  Group(keys, *batch);
  const SparseOptimizerOptions& optimizer = options_.optimizer;
  const int64_t step = this->step();
  Status status = ForEachShard(*batch, [&](int s) {
    Shard& shard = *shards_[s];
    MutexLock lock(shard.mu);
    ResolveRows(shard, s, Access::kPush, step, *batch);
    const int64_t end = batch->begin[s + 1];
    for (int64_t k = batch->begin[s]; k < end; ++k) {
      if (k + kPrefetchDistance < end) __builtin_prefetch(batch->rows[k + kPrefetchDistance]);
      float* row = batch->rows[k];
      if (row == nullptr) continue;  // not admitted: the gradient is dropped
      ApplySparseOptimizer(optimizer, dim_, grads + batch->positions[k] * dim_, row, row + dim_);
    }
  });
  ReturnScratch(std::move(batch));
  return status;
}

int64_t MemoryTable::EvictShard(Shard& shard, int64_t step) const {
  MutexLock lock(shard.mu);
  const size_t row_bytes = sizeof(float) * row_floats_;
  int64_t evicted = 0;
  int64_t slot = 0;
  while (slot < shard.rows.size()) {
    float* row = shard.rows.row(slot);
    const StoredMeta meta = ReadMeta(row + meta_offset_);
    if (step - meta.last_seen_step <= options_.ttl_steps) {
      ++slot;
      continue;
    }
    shard.index.Erase(meta.key, Mix64(meta.key));
    // Fill the hole with the last row; the slot is examined again, as it now
    // holds a row not yet looked at.
    const int64_t last = shard.rows.size() - 1;
    if (slot != last) {
      const float* last_row = shard.rows.row(last);
      const Key moved = ReadMeta(last_row + meta_offset_).key;
      std::memcpy(row, last_row, row_bytes);
      shard.index.SetSlot(moved, Mix64(moved), slot);
    }
    shard.rows.RemoveLast();
    ++evicted;
  }
  if (evicted > 0) shard.index.ShrinkIfSparse();
  shard.evicted += evicted;
  return evicted;
}

int64_t MemoryTable::EvictExpired() {
  if (options_.ttl_steps == 0) return 0;
  const int64_t step = this->step();
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
  if (slot < 0) return std::nullopt;
  const StoredMeta meta = ReadMeta(shard.rows.row(slot) + meta_offset_);
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
    rows += shard->index.size();
  }
  return rows;
}

int64_t MemoryTable::memory_bytes() const {
  int64_t bytes = static_cast<int64_t>(sizeof(MemoryTable) + shards_.capacity() * sizeof(void*));
  for (const auto& shard : shards_) {
    MutexLock lock(shard->mu);
    bytes += ShardBytes(*shard);
  }
  return bytes;
}

TableStats MemoryTable::stats() const {
  TableStats stats;
  stats.memory_bytes =
      static_cast<int64_t>(sizeof(MemoryTable) + shards_.capacity() * sizeof(void*));
  for (const auto& shard : shards_) {
    MutexLock lock(shard->mu);
    stats.rows += shard->index.size();
    stats.memory_bytes += ShardBytes(*shard);
    stats.admitted_keys += shard->admitted;
    stats.rejected_keys += shard->rejected;
    stats.dropped_gradients += shard->dropped;
    stats.evicted_rows += shard->evicted;
  }
  return stats;
}

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
  EMBER_RETURN_IF_ERROR(ValidateAdmissionOptions(options.admission));
  return ValidateSparseOptimizerOptions(options.optimizer);
}

}  // namespace

Result<std::unique_ptr<EmbeddingTable>> NewMemoryTable(const EmbeddingTableOptions& options) {
  EMBER_RETURN_IF_ERROR(ValidateTableOptions(options));
  try {
    return std::unique_ptr<EmbeddingTable>(std::make_unique<MemoryTable>(options));
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("embedding table: out of memory creating ",
                                     options.num_shards, " shards");
  }
}

}  // namespace ember::embedding
