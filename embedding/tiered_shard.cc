// The disk tier of internal::MemoryTable: loading rows a batch needs,
// spilling the coldest rows of a shard over budget, TTL of disk rows, and the
// Prefetch thread. See embedding/tiered_table.h for the design.

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include <glog/logging.h>

#include "core/mutex.h"
#include "core/random.h"
#include "core/status.h"
#include "embedding/internal/memory_table.h"

namespace ember::embedding::internal {
namespace {

// Key batches Prefetch may queue before it blocks: enough to run a few
// batches ahead of the Pulls, few enough to bound the keys held.
constexpr size_t kPrefetchQueueDepth = 4;

}  // namespace

bool MemoryTable::ExpiredOnDisk(const float* meta) const {
  if (options_.ttl_steps == 0) return false;
  const int64_t evict_step = last_evict_step_.load(std::memory_order_relaxed);
  if (evict_step == std::numeric_limits<int64_t>::min()) return false;
  return evict_step - ReadMeta(meta).last_seen_step > options_.ttl_steps;
}

Status MemoryTable::LoadFromDisk(Shard& shard, Access access, ShardIo& io) const {
  const int64_t n = static_cast<int64_t>(io.keys.size());
  const int64_t row_bytes = sizeof(float) * row_floats_;
  io.slots.assign(n, -1);
  io.loaded.clear();
  // Rows are inserted at the end of the arena, so a failure undoes them by
  // removing the last `inserted` slots.
  int64_t inserted = 0;
  auto undo = [&] {
    for (; inserted > 0; --inserted) RemoveSlot(shard, shard.rows.size() - 1);
    io.slots.assign(n, -1);
  };
  // io.loaded receives the expired keys: TTL removed them, so they are
  // deleted from disk. The loaded ones stay there as stale copies (memory
  // wins while the key is in memory; a spill overwrites them), which saves a
  // Delete per loaded row.
  // Read in chunks of kIoChunkRows so that the row buffer stays small
  // whatever the batch (it is kept between batches, per shard, outside the
  // budget); each chunk is one batched Get.
  int64_t read = 0;
  try {
    for (int64_t begin = 0; begin < n; begin += kIoChunkRows) {
      const int64_t count = std::min(kIoChunkRows, n - begin);
      io.chunk_keys.assign(io.keys.begin() + begin, io.keys.begin() + begin + count);
      io.rows.resize(count * row_bytes);
      if (Status got = disk_->Get(io.chunk_keys, io.rows.data(), &io.absent); !got.ok()) {
        undo();
        return got;
      }
      read += count - static_cast<int64_t>(io.absent.size());
      size_t next_absent = 0;
      for (int64_t i = 0; i < count; ++i) {
        if (next_absent < io.absent.size() && io.absent[next_absent] == i) {
          ++next_absent;
          continue;
        }
        // Tier rows are bytes; copy through memcpy-based helpers only.
        alignas(float) float meta[kMetaFloats];
        std::memcpy(meta, io.rows.data() + i * row_bytes + meta_offset_ * sizeof(float),
                    sizeof(meta));
        if (ExpiredOnDisk(meta)) {
          io.loaded.push_back(io.chunk_keys[i]);
          continue;
        }
        // InsertRow copies with memcpy, so the byte buffer needs no alignment.
        io.slots[begin + i] =
            InsertRow(shard, io.chunk_keys[i], Mix64(io.chunk_keys[i]),
                      reinterpret_cast<const float*>(io.rows.data() + i * row_bytes));
        ++inserted;
      }
    }
  } catch (const std::bad_alloc&) {
    undo();
    throw;
  }
  if (!io.loaded.empty()) {
    Status deleted = disk_->Delete(io.loaded);
    if (!deleted.ok()) {
      // The expired rows are still on disk; leave memory as it was.
      undo();
      return deleted;
    }
  }
  shard.counters.disk_reads += read;
  const int64_t expired = static_cast<int64_t>(io.loaded.size());
  // The loaded rows are no longer only on disk.
  shard.counters.disk_rows -= inserted + expired;
  (access == Access::kPrefetch ? shard.counters.prefetched : shard.counters.disk_hits) += inserted;
  shard.counters.evicted += expired;
  if (options_.track_changes) {
    shard.removed.insert(shard.removed.end(), io.loaded.begin(), io.loaded.end());
  }
  return Status::OK();
}

int64_t MemoryTable::TargetRows(const Shard& shard) const {
  const int64_t size = shard.rows.size();
  const int64_t bytes = ShardBytes(shard);
  if (bytes <= shard_budget_bytes_) return size;
  // Everything but the chunks stays as it is (the index only shrinks after
  // the eviction); n rows keep at most ceil(n / rows_per_chunk) + 1 chunks
  // (RowArena keeps one spare).
  const int64_t chunk_bytes = shard.rows.chunk_bytes();
  const int64_t fixed = bytes - shard.rows.num_chunks() * chunk_bytes;
  const int64_t max_chunks = (shard_budget_bytes_ - fixed) / chunk_bytes;
  if (max_chunks < 2) return 0;
  return std::min(size, (max_chunks - 1) * shard.rows.rows_per_chunk());
}

Status MemoryTable::EnforceBudget(Shard& shard, ShardIo& io) const {
  const int64_t row_bytes = sizeof(float) * row_floats_;
  const int64_t step = this->step();
  // A second round is needed only when shrinking the index or the change
  // lists did not free what the first round counted on.
  for (int round = 0; round < 2 && ShardBytes(shard) > shard_budget_bytes_; ++round) {
    const int64_t size = shard.rows.size();
    const int64_t target = TargetRows(shard);
    if (target >= size) break;
    // Move the victims to the end of the arena, coldest last, so that they
    // can be dropped with RemoveLast once they are on disk; until then they
    // are ordinary rows outside the policy.
    for (int64_t live = size; live > target; --live) {
      const int64_t victim = shard.policy.PickVictim(shard.rows, live, step);
      shard.policy.Removed(shard.rows, victim);
      const int64_t last = live - 1;
      if (victim == last) continue;
      float* a = shard.rows.row(victim);
      float* b = shard.rows.row(last);
      std::swap_ranges(a, a + stride_floats_, b);
      const Key moved = ReadMeta(a + meta_offset_).key;
      const Key evicted = ReadMeta(b + meta_offset_).key;
      shard.index.SetSlot(moved, Mix64(moved), victim);
      shard.index.SetSlot(evicted, Mix64(evicted), last);
      shard.policy.Moved(shard.rows, last, victim);
    }
    // Written in chunks of kIoChunkRows rows (one Put each), coldest last, so
    // that the row buffer stays small. A chunk on disk is dropped from
    // memory at once; on error the rows not yet written stay in memory as
    // the coldest, and the next call tries again.
    for (int64_t end = size; end > target;) {
      const int64_t begin = std::max(target, end - kIoChunkRows);
      const int64_t count = end - begin;
      io.chunk_keys.resize(count);
      io.rows.resize(count * row_bytes);
      for (int64_t i = 0; i < count; ++i) {
        const float* row = shard.rows.row(begin + i);
        io.chunk_keys[i] = ReadMeta(row + meta_offset_).key;
        std::memcpy(io.rows.data() + i * row_bytes, row, row_bytes);
      }
      if (Status put = disk_->Put(io.chunk_keys, io.rows.data()); !put.ok()) {
        for (int64_t slot = end - 1; slot >= target; --slot) {
          shard.policy.InsertedCold(shard.rows, slot);
        }
        return put;
      }
      for (int64_t i = count - 1; i >= 0; --i) {
        shard.index.Erase(io.chunk_keys[i], Mix64(io.chunk_keys[i]));
        shard.rows.RemoveLast();
      }
      shard.counters.spilled += count;
      shard.counters.disk_writes += count;
      shard.counters.disk_rows += count;
      end = begin;
    }
    if (shard.rows.size() == 0) shard.policy.Clear();
    shard.index.ShrinkIfSparse();
  }
  return Status::OK();
}

Status MemoryTable::ReadDiskRows(ShardIo& io) const {
  const int64_t n = static_cast<int64_t>(io.keys.size());
  const int64_t row_bytes = sizeof(float) * row_floats_;
  io.rows.resize(n * row_bytes);
  io.slots.resize(n);
  for (int64_t i = 0; i < n; ++i) io.slots[i] = i;
  EMBER_RETURN_IF_ERROR(disk_->Get(io.keys, io.rows.data(), &io.absent));
  for (int64_t i : io.absent) io.slots[i] = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (io.slots[i] < 0) continue;
    alignas(float) float meta[kMetaFloats];
    std::memcpy(meta, io.rows.data() + i * row_bytes + meta_offset_ * sizeof(float),
                sizeof(meta));
    if (ExpiredOnDisk(meta)) io.slots[i] = -1;
  }
  return Status::OK();
}

void MemoryTable::Prefetch(const std::vector<Key>& keys) {
  if (disk_ == nullptr || keys.empty()) return;
  std::vector<Key> copy;
  try {
    copy = keys;
  } catch (const std::bad_alloc&) {
    return;  // a hint: skipping it changes no result
  }
  MutexLock lock(prefetch_mu_);
  prefetch_cv_.Wait(prefetch_mu_, [&] {
    return prefetch_closed_ || prefetch_queue_.size() < kPrefetchQueueDepth;
  });
  if (prefetch_closed_) return;
  prefetch_queue_.push_back(std::move(copy));
  prefetch_cv_.NotifyAll();
}

void MemoryTable::WaitForPrefetch() {
  if (disk_ == nullptr) return;
  MutexLock lock(prefetch_mu_);
  prefetch_cv_.Wait(prefetch_mu_, [&] { return prefetch_queue_.empty() && !prefetch_busy_; });
}

void MemoryTable::PrefetchLoop() {
  while (true) {
    std::vector<Key> keys;
    {
      MutexLock lock(prefetch_mu_);
      prefetch_cv_.Wait(prefetch_mu_,
                        [&] { return prefetch_closed_ || !prefetch_queue_.empty(); });
      if (prefetch_closed_) return;
      keys = std::move(prefetch_queue_.front());
      prefetch_queue_.pop_front();
      prefetch_busy_ = true;
      // Prefetch may be waiting for room.
      prefetch_cv_.NotifyAll();
    }
    PrefetchBatch(keys);
    MutexLock lock(prefetch_mu_);
    prefetch_busy_ = false;
    prefetch_cv_.NotifyAll();
  }
}

void MemoryTable::PrefetchBatch(const std::vector<Key>& keys) {
  std::unique_ptr<BatchScratch> batch = TakeScratch();
  Group(keys, *batch);
  Status first;
  // Shard by shard on this thread: Pulls in the caller's arena keep their
  // threads, and each shard's lock is held only for its own keys.
  for (int s = 0; s < num_shards_ && first.ok(); ++s) {
    const int64_t begin = batch->begin[s];
    const int64_t end = batch->begin[s + 1];
    if (begin == end) continue;
    Shard& shard = *shards_[s];
    ShardIo& io = batch->io[s];
    MutexLock lock(shard.mu);
    io.keys.clear();
    for (int64_t k = begin; k < end; ++k) {
      if (shard.index.Find(batch->keys[k], batch->hashes[k]) < 0) io.keys.push_back(batch->keys[k]);
    }
    if (io.keys.empty()) continue;
    try {
      first = LoadFromDisk(shard, Access::kPrefetch, io);
      if (first.ok()) first = EnforceBudget(shard, io);
    } catch (const std::bad_alloc&) {
      first = Status::ResourceExhausted("embedding table: out of memory prefetching rows");
    }
  }
  ReturnScratch(std::move(batch));
  if (first.ok()) return;
  LOG_EVERY_N(WARNING, 100) << "embedding prefetch failed: " << first;
  MutexLock lock(prefetch_mu_);
  if (prefetch_error_.ok()) prefetch_error_ = std::move(first);
  // Release: pairs with the acquire in TakePrefetchError.
  has_prefetch_error_.store(true, std::memory_order_release);
}

}  // namespace ember::embedding::internal
