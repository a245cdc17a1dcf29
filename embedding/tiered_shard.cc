// The disk tier of internal::MemoryTable: loading rows a batch needs,
// spilling the coldest rows of a shard over budget, TTL of disk rows, and the
// Prefetch loaders with the pins that keep their rows in memory. See embedding/tiered_table.h for the design.

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
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
    ++shard.disk_version;
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
    // Rows pulled at the current step (their Push is coming) and rows a
    // pending Prefetch asked for (their Pull is coming) are passed over while
    // others are left: evicting them would only make that Push or Pull read
    // them back. The loaders' spills run between a Pull and its Push, so
    // this matters with Prefetch even under LRU. At most `size` picks are
    // passed over, so a shard full of such rows still gets within budget.
    if (!shard.pinned.empty()) DropExpiredPins(shard, step);
    int64_t spares = size;
    // Move the victims to the end of the arena, coldest last, so that they
    // can be dropped with RemoveLast once they are on disk; until then they
    // are ordinary rows outside the policy.
    for (int64_t live = size; live > target; --live) {
      int64_t victim = shard.policy.PickVictim(shard.rows, live, step);
      for (; spares > 0 && Spared(shard, victim, step); --spares) {
        shard.policy.Accessed(shard.rows, victim);  // LRU: to the hot end
        victim = shard.policy.PickVictim(shard.rows, live, step);
      }
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
      ++shard.disk_version;
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
  std::shared_ptr<PrefetchRequest> request;
  try {
    request = std::make_shared<PrefetchRequest>();
    request->keys = keys;
  } catch (const std::bad_alloc&) {
    return;  // a hint: skipping it changes no result
  }
  // The Pull these keys are for comes at most a queue's depth of Prefetches
  // later (Prefetch blocks beyond that), and the step normally advances once
  // per Pull; the margin covers a caller that sets the step just before or
  // after its Prefetch.
  request->step = step();
  request->pin_until_step = request->step + static_cast<int64_t>(kPrefetchQueueDepth) + 1;
  MutexLock lock(prefetch_mu_);
  prefetch_cv_.Wait(prefetch_mu_, [&] {
    if (prefetch_closed_) return true;
    for (const auto& loader : loaders_) {
      if (loader->queue.size() >= kPrefetchQueueDepth) return false;
    }
    return true;
  });
  if (prefetch_closed_) return;
  for (auto& loader : loaders_) loader->queue.push_back(request);
  prefetch_cv_.NotifyAll();
}

void MemoryTable::WaitForPrefetch() {
  if (disk_ == nullptr) return;
  MutexLock lock(prefetch_mu_);
  prefetch_cv_.Wait(prefetch_mu_, [&] {
    for (const auto& loader : loaders_) {
      if (!loader->queue.empty() || loader->busy) return false;
    }
    return true;
  });
}

void MemoryTable::PrefetchLoop(int index) {
  PrefetchLoader& loader = *loaders_[index];
  while (true) {
    std::shared_ptr<const PrefetchRequest> request;
    {
      MutexLock lock(prefetch_mu_);
      prefetch_cv_.Wait(prefetch_mu_, [&] { return prefetch_closed_ || !loader.queue.empty(); });
      if (prefetch_closed_) return;
      request = std::move(loader.queue.front());
      loader.queue.pop_front();
      loader.busy = true;
      // Prefetch may be waiting for room.
      prefetch_cv_.NotifyAll();
    }
    PrefetchBatch(*request, index);
    request.reset();
    MutexLock lock(prefetch_mu_);
    loader.busy = false;
    prefetch_cv_.NotifyAll();
  }
}

void MemoryTable::PrefetchBatch(const PrefetchRequest& request, int loader) {
  const int loaders = static_cast<int>(loaders_.size());
  std::unique_ptr<BatchScratch> batch = TakeScratch();
  Status first;
  try {
    // The keys of this loader's shards, grouped by shard like a Pull's.
    std::vector<Key> mine;
    mine.reserve(request.keys.size() / loaders + 1);
    for (Key key : request.keys) {
      const uint64_t s = Mix64(key) % static_cast<uint64_t>(num_shards_);
      if (static_cast<int>(s % loaders) == loader) mine.push_back(key);
    }
    Group(mine, *batch);
    // Shard by shard on this thread: Pulls in the caller's arena keep their
    // threads, the loaders' shards are disjoint, and a shard's lock is not
    // held while its rows are read from disk.
    for (int s = loader; s < num_shards_ && first.ok(); s += loaders) {
      if (batch->begin[s] == batch->begin[s + 1]) continue;
      first = PrefetchShard(*shards_[s], s, request, *batch);
    }
  } catch (const std::bad_alloc&) {
    first = Status::ResourceExhausted("embedding table: out of memory prefetching rows");
  }
  ReturnScratch(std::move(batch));
  if (first.ok()) return;
  LOG_EVERY_N(WARNING, 100) << "embedding prefetch failed: " << first;
  MutexLock lock(prefetch_mu_);
  if (prefetch_error_.ok()) prefetch_error_ = std::move(first);
  // Release: pairs with the acquire in TakePrefetchError.
  has_prefetch_error_.store(true, std::memory_order_release);
}

Status MemoryTable::PrefetchShard(Shard& shard, int s, const PrefetchRequest& request,
                                  BatchScratch& batch) const {
  ShardIo& io = batch.io[s];
  io.keys.clear();
  int64_t version;
  {
    MutexLock lock(shard.mu);
    // Rows already in memory are pinned too: they must still be there when
    // the Pull comes.
    Pin(shard, s, request.pin_until_step, batch);
    for (int64_t k = batch.begin[s]; k < batch.begin[s + 1]; ++k) {
      if (shard.index.Find(batch.keys[k], batch.hashes[k]) < 0) io.keys.push_back(batch.keys[k]);
    }
    version = shard.disk_version;
  }
  if (io.keys.empty()) return Status::OK();
  EMBER_RETURN_IF_ERROR(ReadDiskRows(io));
  const int64_t row_bytes = sizeof(float) * row_floats_;
  MutexLock lock(shard.mu);
  int64_t read = 0;
  for (int64_t slot : io.slots) read += slot >= 0;
  shard.counters.disk_reads += read;
  // A write or delete of this shard's disk rows since the read may have
  // replaced what was read (a row loaded, updated and spilled again): the
  // rows are only a hint, so drop them all rather than tell which.
  if (shard.disk_version != version) return Status::OK();
  int64_t inserted = 0;
  for (size_t i = 0; i < io.keys.size(); ++i) {
    if (io.slots[i] < 0) continue;  // absent or expired: the Pull decides
    const Key key = io.keys[i];
    const uint64_t hash = Mix64(key);
    // A Pull or Push loaded or created it meanwhile: memory's row is newer.
    if (shard.index.Find(key, hash) >= 0) continue;
    const char* row = io.rows.data() + i * row_bytes;
    // TTL may have run since the read.
    alignas(float) float meta[kMetaFloats];
    std::memcpy(meta, row + meta_offset_ * sizeof(float), sizeof(meta));
    if (ExpiredOnDisk(meta)) continue;
    // Pulled after the Prefetch and evicted since: the loaders are behind
    // and the Pull this row was for has most likely come and gone. Loading
    // it would only push out a row that a coming Pull needs.
    if (ReadMeta(meta).last_seen_step > request.step) continue;
    // InsertRow copies with memcpy, so the byte buffer needs no alignment.
    InsertRow(shard, key, hash, reinterpret_cast<const float*>(row));
    ++inserted;
  }
  shard.counters.prefetched += inserted;
  shard.counters.disk_rows -= inserted;
  return EnforceBudget(shard, io);
}

void MemoryTable::Pin(Shard& shard, int s, int64_t until_step, const BatchScratch& batch) const {
  std::vector<PinnedKey>& pinned = shard.pinned;
  const size_t old_size = pinned.size();
  for (int64_t k = batch.begin[s]; k < batch.begin[s + 1]; ++k) {
    pinned.push_back(PinnedKey{batch.keys[k], until_step});
  }
  std::sort(pinned.begin(), pinned.end(), [](const PinnedKey& a, const PinnedKey& b) {
    return a.key < b.key || (a.key == b.key && a.until_step > b.until_step);
  });
  // One entry per key, the latest step first after the sort.
  pinned.erase(std::unique(pinned.begin(), pinned.end(),
                           [](const PinnedKey& a, const PinnedKey& b) { return a.key == b.key; }),
               pinned.end());
  if (pinned.size() > old_size) DropExpiredPins(shard, step());
}

void MemoryTable::Unpin(Shard& shard, int s, const BatchScratch& batch) const {
  std::vector<PinnedKey>& pinned = shard.pinned;
  bool any = false;
  for (int64_t k = batch.begin[s]; k < batch.begin[s + 1]; ++k) {
    auto it = std::lower_bound(pinned.begin(), pinned.end(), batch.keys[k],
                               [](const PinnedKey& p, Key key) { return p.key < key; });
    if (it == pinned.end() || it->key != batch.keys[k]) continue;
    it->until_step = std::numeric_limits<int64_t>::min();
    any = true;
  }
  if (any) DropExpiredPins(shard, std::numeric_limits<int64_t>::min() + 1);
}

bool MemoryTable::Spared(const Shard& shard, int64_t slot, int64_t step) const {
  const StoredMeta meta = ReadMeta(shard.rows.row(slot) + meta_offset_);
  if (meta.last_seen_step == step) return true;
  if (shard.pinned.empty()) return false;
  const Key key = meta.key;
  auto it = std::lower_bound(shard.pinned.begin(), shard.pinned.end(), key,
                             [](const PinnedKey& p, Key k) { return p.key < k; });
  return it != shard.pinned.end() && it->key == key && it->until_step >= step;
}

int64_t MemoryTable::DropExpiredPins(Shard& shard, int64_t step) const {
  std::vector<PinnedKey>& pinned = shard.pinned;
  pinned.erase(std::remove_if(pinned.begin(), pinned.end(),
                              [&](const PinnedKey& p) { return p.until_step < step; }),
               pinned.end());
  if (pinned.empty()) std::vector<PinnedKey>().swap(pinned);
  return static_cast<int64_t>(pinned.size());
}

}  // namespace ember::embedding::internal
