// BatchScratchPool: a batch's keys grouped by shard, the scratch that holds
// them kept between batches, the keys grouped ahead of their Pull
// (PrepareKeys) and the resolved Pulls kept for the Push of the same keys
// (see embedding/internal/batch_scratch.h).

#include "embedding/internal/batch_scratch.h"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "core/random.h"

namespace ember::embedding::internal {

BatchScratchPool::BatchScratchPool(int num_shards, bool with_io, int64_t keep_io_bytes)
    : num_shards_(num_shards), with_io_(with_io), keep_io_bytes_(keep_io_bytes) {}

std::unique_ptr<BatchScratch> BatchScratchPool::Take() {
  {
    MutexLock lock(mu_);
    if (!free_.empty()) {
      std::unique_ptr<BatchScratch> scratch = std::move(free_.back());
      free_.pop_back();
      return scratch;
    }
  }
  auto scratch = std::make_unique<BatchScratch>();
  scratch->status.resize(num_shards_);
  scratch->all_rows.resize(num_shards_);
  scratch->removals.resize(num_shards_);
  if (with_io_) scratch->io.resize(num_shards_);
  return scratch;
}

void BatchScratchPool::Return(std::unique_ptr<BatchScratch> scratch) {
  // Reads for Lookup and snapshots fill a shard's row buffer with all of its
  // keys at once: give such buffers back rather than keep them for every
  // later batch.
  const size_t keep_bytes = static_cast<size_t>(keep_io_bytes_);
  for (ShardIo& io : scratch->io) {
    if (io.rows.capacity() > keep_bytes) std::vector<char>().swap(io.rows);
  }
  MutexLock lock(mu_);
  free_.push_back(std::move(scratch));
}

namespace {

template <typename T>
int64_t CapacityBytes(const std::vector<T>& v) {
  return static_cast<int64_t>(v.capacity() * sizeof(T));
}

int64_t ScratchBytes(const BatchScratch& b) {
  int64_t bytes = sizeof(BatchScratch) + CapacityBytes(b.begin) + CapacityBytes(b.shard_of) +
                  CapacityBytes(b.keys) + CapacityBytes(b.hashes) + CapacityBytes(b.positions) +
                  CapacityBytes(b.rows) + CapacityBytes(b.status) + CapacityBytes(b.io) +
                  CapacityBytes(b.kept_copy) + CapacityBytes(b.all_rows) +
                  CapacityBytes(b.removals);
  for (const ShardIo& io : b.io) {
    bytes += CapacityBytes(io.keys) + CapacityBytes(io.chunk_keys) + CapacityBytes(io.positions) +
             CapacityBytes(io.slots) + CapacityBytes(io.candidates) + CapacityBytes(io.absent) +
             CapacityBytes(io.rows) + CapacityBytes(io.loaded);
  }
  return bytes;
}

}  // namespace

int64_t BatchScratchPool::bytes() const {
  MutexLock lock(mu_);
  int64_t bytes = 0;
  for (const auto* list : {&free_, &resolved_pulls_, &prepared_}) {
    for (const std::unique_ptr<BatchScratch>& scratch : *list) bytes += ScratchBytes(*scratch);
  }
  return bytes;
}

std::vector<std::unique_ptr<BatchScratch>>& BatchScratchPool::KeptList(Kept kind) {
  return kind == Kept::kPrepared ? prepared_ : resolved_pulls_;
}

void BatchScratchPool::Keep(Kept kind, const std::vector<Key>& keys,
                            std::unique_ptr<BatchScratch> scratch) {
  // More than a pipeline's usual batches in flight between pull and push;
  // scratch never taken (a Pull whose keys are never pushed as such: the
  // trainer's partial early pulls, calibration; keys prepared and then
  // pulled from another array) is dropped after 8 others, so that it is not
  // held for long.
  constexpr size_t kMaxKept = 8;
  scratch->kept_keys = keys.data();
  scratch->kept_copy.assign(keys.begin(), keys.end());
  std::unique_ptr<BatchScratch> oldest;
  {
    MutexLock lock(mu_);
    std::vector<std::unique_ptr<BatchScratch>>& kept = KeptList(kind);
    if (kept.size() >= kMaxKept) {
      oldest = std::move(kept.front());
      kept.erase(kept.begin());
    }
    kept.push_back(std::move(scratch));
  }
  if (oldest != nullptr) Return(std::move(oldest));
}

std::unique_ptr<BatchScratch> BatchScratchPool::TakeKept(Kept kind, const std::vector<Key>& keys) {
  std::unique_ptr<BatchScratch> batch;
  {
    MutexLock lock(mu_);
    std::vector<std::unique_ptr<BatchScratch>>& kept = KeptList(kind);
    for (size_t i = kept.size(); i-- > 0;) {
      if (kept[i]->kept_keys == keys.data() && kept[i]->kept_copy.size() == keys.size()) {
        batch = std::move(kept[i]);
        kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    }
  }
  if (batch == nullptr) return nullptr;
  batch->kept_keys = nullptr;
  // The caller may have refilled the same array since: the grouping must
  // still describe it, key for key.
  if (!std::equal(keys.begin(), keys.end(), batch->kept_copy.begin())) {
    Return(std::move(batch));
    return nullptr;
  }
  return batch;
}

void BatchScratchPool::Prepare(const std::vector<Key>& keys) {
  if (keys.empty()) return;
  std::unique_ptr<BatchScratch> batch = Take();
  Group(keys, *batch);
  Keep(Kept::kPrepared, keys, std::move(batch));
}

std::unique_ptr<BatchScratch> BatchScratchPool::GroupForPull(const std::vector<Key>& keys) {
  std::unique_ptr<BatchScratch> batch = TakeKept(Kept::kPrepared, keys);
  if (batch != nullptr) {
    prepared_pulls_.fetch_add(1, std::memory_order_relaxed);
    return batch;
  }
  batch = Take();
  Group(keys, *batch);
  return batch;
}

void BatchScratchPool::Group(const std::vector<Key>& keys, BatchScratch& batch) const {
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

}  // namespace ember::embedding::internal
