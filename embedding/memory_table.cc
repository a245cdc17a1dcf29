// NewMemoryTable: the in-memory EmbeddingTable.
//
// Keys are spread over shards by Mix64(key) % num_shards. A shard is a mutex,
// a flat open-addressing index (key -> slot, linear probing) and an arena of
// rows in fixed-size chunks, so that growing never moves a row. A row is dim
// weights followed by the optimizer's state (none for SGD).
//
// A batch is grouped by shard in one counting-sort pass; then each shard,
// under its own lock taken once per batch, resolves its keys to rows (the
// index lookups prefetched a few keys ahead) and copies or updates them (the
// rows prefetched a few keys ahead). Shards run in parallel in the caller's
// arena; there is no table-wide lock.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "core/random.h"
#include "core/status.h"
#include "core/threads.h"
#include "embedding/embedding_table.h"
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

// key -> slot, open addressing with linear probing. An entry is empty when its
// slot is negative, so every 64-bit key (0 and ~0 included) can be stored.
// The bucket of a key is the top bits of its hash: the shard was chosen by
// hash % num_shards, whose low bits are the same for every key of a shard.
// Thread safety: none; the owning shard's mutex guards it.
class KeyIndex {
 public:
  KeyIndex() { Allocate(kMinCapacity); }

  int64_t size() const { return size_; }
  int64_t bytes() const { return capacity_ * static_cast<int64_t>(sizeof(Entry)); }

  void Prefetch(uint64_t hash) const { __builtin_prefetch(&entries_[Bucket(hash)]); }

  // Returns the slot of `key`, or -1 if it is absent.
  int64_t Find(Key key, uint64_t hash) const {
    for (uint64_t i = Bucket(hash);; i = (i + 1) & mask_) {
      const Entry& entry = entries_[i];
      if (entry.slot < 0) return -1;
      if (entry.key == key) return entry.slot;
    }
  }

  // Grows (rehashes) if one more key would pass the load limit. May throw
  // std::bad_alloc, leaving the index as it was.
  void ReserveOneMore() {
    if (size_ + 1 > grow_at_) Rehash(capacity_ * 2);
  }

  // Adds `key` -> `slot`. Never allocates.
  // REQUIRES: key is absent; ReserveOneMore() was called since the last Insert.
  void Insert(Key key, uint64_t hash, int64_t slot) {
    uint64_t i = Bucket(hash);
    while (entries_[i].slot >= 0) i = (i + 1) & mask_;
    entries_[i] = Entry{key, slot};
    ++size_;
  }

 private:
  struct Entry {
    Key key;
    int64_t slot;  // < 0: empty
  };
  static constexpr int64_t kMinCapacity = 16;

  uint64_t Bucket(uint64_t hash) const { return hash >> shift_; }

  void Allocate(int64_t capacity) {
    auto entries = std::make_unique_for_overwrite<Entry[]>(capacity);
    for (int64_t i = 0; i < capacity; ++i) entries[i].slot = -1;
    entries_ = std::move(entries);
    capacity_ = capacity;
    mask_ = static_cast<uint64_t>(capacity) - 1;
    shift_ = 64 - std::countr_zero(static_cast<uint64_t>(capacity));
    // Linear probing stays short up to a load of about 0.7.
    grow_at_ = capacity / 10 * 7;
  }

  void Rehash(int64_t capacity) {
    std::unique_ptr<Entry[]> old = std::move(entries_);
    const int64_t old_capacity = capacity_;
    try {
      Allocate(capacity);
    } catch (...) {
      entries_ = std::move(old);  // unchanged: capacity_ etc. were not yet set
      throw;
    }
    for (int64_t i = 0; i < old_capacity; ++i) {
      if (old[i].slot < 0) continue;
      uint64_t b = Bucket(Mix64(old[i].key));
      while (entries_[b].slot >= 0) b = (b + 1) & mask_;
      entries_[b] = old[i];
    }
  }

  std::unique_ptr<Entry[]> entries_;
  int64_t capacity_ = 0;
  uint64_t mask_ = 0;
  int shift_ = 64;
  int64_t size_ = 0;
  int64_t grow_at_ = 0;
};

// Rows of row_floats floats, addressed by slot, in chunks that never move.
// Thread safety: none; the owning shard's mutex guards it.
class RowArena {
 public:
  explicit RowArena(int64_t row_floats) : row_floats_(row_floats) {
    const int64_t rows = std::max<int64_t>(1, kChunkBytes / (row_floats * 4));
    chunk_shift_ = 63 - std::countl_zero(static_cast<uint64_t>(rows));  // floor(log2)
    chunk_mask_ = (int64_t{1} << chunk_shift_) - 1;
  }

  int64_t size() const { return size_; }
  int64_t bytes() const {
    return static_cast<int64_t>(chunks_.size()) * ChunkFloats() * 4 +
           static_cast<int64_t>(chunks_.capacity() * sizeof(chunks_[0]));
  }

  float* row(int64_t slot) const {
    return chunks_[slot >> chunk_shift_].get() + (slot & chunk_mask_) * row_floats_;
  }

  // Makes room for one more row. May throw std::bad_alloc, leaving the arena
  // as it was.
  void ReserveOneMore() {
    if (size_ < static_cast<int64_t>(chunks_.size()) << chunk_shift_) return;
    auto chunk = std::make_unique_for_overwrite<float[]>(ChunkFloats());
    chunks_.push_back(std::move(chunk));
  }

  // Returns the slot of a new, uninitialised row. REQUIRES: ReserveOneMore()
  // was called since the last Append.
  int64_t Append() { return size_++; }

 private:
  int64_t ChunkFloats() const { return (int64_t{1} << chunk_shift_) * row_floats_; }

  int64_t row_floats_;
  int chunk_shift_ = 0;
  int64_t chunk_mask_ = 0;
  std::vector<std::unique_ptr<float[]>> chunks_;
  int64_t size_ = 0;
};

// Thread safety: fields are guarded by mu. Aligned so that neighbouring
// shards' mutexes do not share a cache line.
struct alignas(64) Shard {
  explicit Shard(int64_t row_floats) : rows(row_floats) {}

  mutable Mutex mu;
  KeyIndex index GUARDED_BY(mu);
  RowArena rows GUARDED_BY(mu);
};

// One batch's keys grouped by shard: the keys of shard s, their hashes and
// their positions in the caller's arrays are at [begin[s], begin[s + 1]).
// `rows` receives the resolved row of each grouped key.
struct BatchScratch {
  std::vector<int64_t> begin;
  std::vector<uint32_t> shard_of;
  std::vector<Key> keys;
  std::vector<uint64_t> hashes;
  std::vector<int64_t> positions;
  std::vector<float*> rows;
};

// Thread safety: Pull, Push and the accessors may be called concurrently.
class MemoryTable final : public EmbeddingTable {
 public:
  explicit MemoryTable(const EmbeddingTableOptions& options)
      : options_(options),
        dim_(options.dim),
        num_shards_(options.num_shards),
        row_floats_(int64_t{options.dim} *
                    (1 + StateFloatsPerElement(options.optimizer.type))),
        init_scale_(InitScale(options)) {
    shards_.reserve(num_shards_);
    for (int s = 0; s < num_shards_; ++s) shards_.push_back(std::make_unique<Shard>(row_floats_));
  }
  MemoryTable(const MemoryTable&) = delete;
  MemoryTable& operator=(const MemoryTable&) = delete;

  Status Pull(const std::vector<Key>& keys, float* out) override;
  Status Push(const std::vector<Key>& keys, const float* grads) override;

  int dim() const override { return dim_; }
  int64_t num_rows() const override;
  int64_t memory_bytes() const override;

 private:
  // Fills `batch` with `keys` grouped by shard.
  void Group(const std::vector<Key>& keys, BatchScratch& batch) const;
  // Calls shard_fn(shard) for every shard with keys in `batch`, in parallel
  // when the batch is large enough. Returns ResourceExhausted if memory runs
  // out; rows created before that stay valid.
  template <typename ShardFn>
  Status ForEachShard(const BatchScratch& batch, const ShardFn& shard_fn) const;
  // Resolves the keys of shard `s` in `batch` to rows, creating missing ones,
  // into batch.rows. REQUIRES: shard.mu is held.
  void ResolveRows(Shard& shard, int s, BatchScratch& batch) const REQUIRES(shard.mu);
  // Creates the row of `key`; returns its slot. May throw std::bad_alloc.
  int64_t CreateRow(Shard& shard, Key key, uint64_t hash) const REQUIRES(shard.mu);

  std::unique_ptr<BatchScratch> TakeScratch();
  void ReturnScratch(std::unique_ptr<BatchScratch> scratch);

  const EmbeddingTableOptions options_;
  const int dim_;
  const int num_shards_;
  const int64_t row_floats_;
  const float init_scale_;
  std::vector<std::unique_ptr<Shard>> shards_;

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

int64_t MemoryTable::CreateRow(Shard& shard, Key key, uint64_t hash) const {
  // Allocate first, so that a failure leaves index and arena consistent.
  shard.index.ReserveOneMore();
  shard.rows.ReserveOneMore();
  const int64_t slot = shard.rows.Append();
  float* row = shard.rows.row(slot);
  InitRowWeights(options_.seed, key, init_scale_, dim_, row);
  InitOptimizerState(options_.optimizer, dim_, row + dim_);
  shard.index.Insert(key, hash, slot);
  return slot;
}

void MemoryTable::ResolveRows(Shard& shard, int s, BatchScratch& batch) const {
  const int64_t begin = batch.begin[s];
  const int64_t end = batch.begin[s + 1];
  for (int64_t k = begin; k < end; ++k) {
    if (k + kPrefetchDistance < end) shard.index.Prefetch(batch.hashes[k + kPrefetchDistance]);
    int64_t slot = shard.index.Find(batch.keys[k], batch.hashes[k]);
    if (slot < 0) slot = CreateRow(shard, batch.keys[k], batch.hashes[k]);
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
  Status status = ForEachShard(*batch, [&](int s) {
    Shard& shard = *shards_[s];
    MutexLock lock(shard.mu);
    ResolveRows(shard, s, *batch);
    const int64_t end = batch->begin[s + 1];
    for (int64_t k = batch->begin[s]; k < end; ++k) {
      if (k + kPrefetchDistance < end) __builtin_prefetch(batch->rows[k + kPrefetchDistance]);
      std::memcpy(out + batch->positions[k] * dim_, batch->rows[k], row_bytes);
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
  Status status = ForEachShard(*batch, [&](int s) {
    Shard& shard = *shards_[s];
    MutexLock lock(shard.mu);
    ResolveRows(shard, s, *batch);
    const int64_t end = batch->begin[s + 1];
    for (int64_t k = batch->begin[s]; k < end; ++k) {
      if (k + kPrefetchDistance < end) __builtin_prefetch(batch->rows[k + kPrefetchDistance]);
      float* row = batch->rows[k];
      ApplySparseOptimizer(optimizer, dim_, grads + batch->positions[k] * dim_, row, row + dim_);
    }
  });
  ReturnScratch(std::move(batch));
  return status;
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
    bytes += static_cast<int64_t>(sizeof(Shard)) + shard->index.bytes() + shard->rows.bytes();
  }
  return bytes;
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
