// The disk side of internal::CachedTable, the tier behind its row cache, one
// shard at a time under the cache's lock of that shard: loading the rows a
// batch needs, writing back the cache's victims, and TTL of disk rows. See
// embedding/tiered_table.h for the design.

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <vector>

#include <glog/logging.h>

#include "core/mutex.h"
#include "core/random.h"
#include "core/status.h"
#include "embedding/internal/cached_table.h"

namespace ember::embedding::internal {

bool CachedTable::ExpiredOnDisk(const float* meta) const {
  const int64_t ttl_steps = cache_.options().ttl_steps;
  if (ttl_steps == 0) return false;
  const int64_t evict_step = cache_.last_eviction_step();
  if (evict_step == std::numeric_limits<int64_t>::min()) return false;
  return evict_step - ReadMeta(meta).last_seen_step > ttl_steps;
}

Status CachedTable::LoadFromDisk(Shard& shard, Access access, ShardIo& io) const {
  const int64_t n = static_cast<int64_t>(io.keys.size());
  const int64_t row_bytes = sizeof(float) * cache_.row_floats();
  const int64_t meta_offset = cache_.meta_offset();
  io.slots.assign(n, -1);
  io.loaded.clear();
  // Only the keys the disk may hold are looked up there; the others (most
  // of them seen for the first time) cost no disk work.
  SelectDiskCandidates(shard, io);
  const int64_t candidates = static_cast<int64_t>(io.candidates.size());
  if (candidates == 0) return Status::OK();
  // Rows are inserted at the end of the arena, so a failure undoes them by
  // removing the last `inserted` slots.
  int64_t inserted = 0;
  auto undo = [&] {
    for (; inserted > 0; --inserted) cache_.RemoveSlot(shard, shard.rows.size() - 1);
    io.slots.assign(n, -1);
  };
  // io.loaded receives the expired keys: TTL removed them, so they are
  // deleted from disk. The loaded ones stay there as stale copies (memory
  // wins while the key is in memory; a write-back overwrites them), which
  // saves a Delete per loaded row.
  // Read in chunks of kIoChunkRows so that the row buffer stays small
  // whatever the batch (it is kept between batches, per shard, outside the
  // budget); each chunk is one batched Get.
  int64_t read = 0;
  try {
    for (int64_t begin = 0; begin < candidates; begin += kIoChunkRows) {
      const int64_t count = std::min(kIoChunkRows, candidates - begin);
      io.chunk_keys.resize(count);
      for (int64_t i = 0; i < count; ++i) io.chunk_keys[i] = io.keys[io.candidates[begin + i]];
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
        std::memcpy(meta, io.rows.data() + i * row_bytes + meta_offset * sizeof(float),
                    sizeof(meta));
        if (ExpiredOnDisk(meta)) {
          io.loaded.push_back(io.chunk_keys[i]);
          continue;
        }
        // InsertRow copies with memcpy, so the byte buffer needs no alignment.
        io.slots[io.candidates[begin + i]] =
            cache_.InsertRow(shard, io.chunk_keys[i], Mix64(io.chunk_keys[i]),
                             reinterpret_cast<const float*>(io.rows.data() + i * row_bytes));
        ++inserted;
      }
    }
  } catch (const std::bad_alloc&) {
    undo();
    throw;
  }
  if (!io.loaded.empty()) {
    NoteDiskChange(shard, io.loaded);
    Status deleted = disk_->Delete(io.loaded);
    if (!deleted.ok()) {
      // The expired rows are still on disk; leave memory as it was.
      undo();
      return deleted;
    }
  }
  shard.next.disk_reads += read;
  const int64_t expired = static_cast<int64_t>(io.loaded.size());
  // The loaded rows are no longer only on disk.
  shard.next.disk_rows -= inserted + expired;
  (access == Access::kPrefetch ? shard.next.prefetched : shard.next.disk_hits) += inserted;
  shard.next.expired += expired;
  cache_.RecordRemoved(shard, io.loaded);
  return Status::OK();
}

void CachedTable::SelectDiskCandidates(const Shard& /*shard*/, ShardIo& io) const {
  io.candidates.clear();
  const size_t n = io.keys.size();
  if (n == 0) return;
  // The keys are all of one shard: one filter answers for them all.
  const KeyFilter* filter = disk_keys_[cache_.ShardOf(Mix64(io.keys[0]))].get();
  if (filter == nullptr) return;  // the shard never wrote to disk
  for (size_t i = 0; i < n; ++i) {
    if (i + kFilterPrefetchDistance < n) {
      filter->Prefetch(Mix64(io.keys[i + kFilterPrefetchDistance]));
    }
    if (filter->MayContain(Mix64(io.keys[i]))) io.candidates.push_back(static_cast<int64_t>(i));
  }
}

void CachedTable::AddDiskKeys(Shard& shard, const std::vector<Key>& keys) const {
  if (keys.empty()) return;
  std::unique_ptr<KeyFilter>& filter = disk_keys_[cache_.ShardOf(Mix64(keys[0]))];
  if (filter == nullptr) filter = std::make_unique<KeyFilter>(max_filter_bytes_);
  const size_t n = keys.size();
  for (size_t i = 0; i < n; ++i) {
    if (i + kFilterPrefetchDistance < n) {
      filter->Prefetch(Mix64(keys[i + kFilterPrefetchDistance]));
    }
    filter->Add(Mix64(keys[i]));
  }
  shard.next_tier_bytes = static_cast<uint32_t>(sizeof(KeyFilter) + filter->bytes());
}

Status CachedTable::WriteBack(Shard& shard, ShardIo& io) const {
  const MemoryBudget& budget = cache_.budget();
  const int64_t row_bytes = sizeof(float) * cache_.row_floats();
  const int64_t meta_offset = cache_.meta_offset();
  const int64_t step = cache_.step();
  // A further round is needed only when shrinking the index did not free
  // what the first round counted on, or the filter of disk keys grew.
  for (int round = 0; round < 3 && budget.OverBudget(shard); ++round) {
    const int64_t size = shard.rows.size();
    const int64_t target = budget.SelectVictims(shard, step);
    if (target >= size) break;
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
        io.chunk_keys[i] = ReadMeta(row + meta_offset).key;
        std::memcpy(io.rows.data() + i * row_bytes, row, row_bytes);
      }
      // Into the filter first: should the Put fail, a key the filter holds
      // but the disk does not is only a false positive.
      AddDiskKeys(shard, io.chunk_keys);
      NoteDiskChange(shard, io.chunk_keys);
      if (Status put = disk_->Put(io.chunk_keys, io.rows.data()); !put.ok()) {
        budget.KeepVictims(shard, target, end);
        return put;
      }
      budget.DropVictims(shard, io.chunk_keys);
      shard.next.spilled += count;
      shard.next.disk_writes += count;
      shard.next.disk_rows += count;
      end = begin;
    }
    budget.Compact(shard);
  }
  return Status::OK();
}

Status CachedTable::ReadDiskRows(const Shard* shard, ShardIo& io) const {
  const int64_t n = static_cast<int64_t>(io.keys.size());
  const int64_t row_bytes = sizeof(float) * cache_.row_floats();
  const int64_t meta_offset = cache_.meta_offset();
  io.slots.assign(n, -1);
  if (shard != nullptr) {
    SelectDiskCandidates(*shard, io);
  } else {
    io.candidates.resize(n);
    for (int64_t i = 0; i < n; ++i) io.candidates[i] = i;
  }
  const int64_t candidates = static_cast<int64_t>(io.candidates.size());
  if (candidates == 0) return Status::OK();
  io.chunk_keys.resize(candidates);
  for (int64_t j = 0; j < candidates; ++j) io.chunk_keys[j] = io.keys[io.candidates[j]];
  io.rows.resize(n * row_bytes);
  // Read into the rows of the candidates' last positions, then moved into
  // place from the back (candidates[j] >= j), so that io.rows holds row i of
  // key i.
  EMBER_RETURN_IF_ERROR(disk_->Get(io.chunk_keys, io.rows.data(), &io.absent));
  size_t next_absent = io.absent.size();
  for (int64_t j = candidates - 1; j >= 0; --j) {
    if (next_absent > 0 && io.absent[next_absent - 1] == j) {
      --next_absent;
      continue;
    }
    const int64_t i = io.candidates[j];
    char* row = io.rows.data() + i * row_bytes;
    if (i != j) std::memcpy(row, io.rows.data() + j * row_bytes, row_bytes);
    alignas(float) float meta[kMetaFloats];
    std::memcpy(meta, row + meta_offset * sizeof(float), sizeof(meta));
    if (!ExpiredOnDisk(meta)) io.slots[i] = i;
  }
  return Status::OK();
}

void CachedTable::NoteDiskChange(Shard& shard, const std::vector<Key>& keys) const {
  ChangeLog* log = shard.next.reading.get();
  if (log == nullptr || log->lost) return;
  try {
    log->keys.insert(log->keys.end(), keys.begin(), keys.end());
  } catch (const std::bad_alloc&) {
    log->lost = true;
  }
}

void CachedTable::DeleteExpiredCopies(Shard& shard, const std::vector<Key>& keys) const {
  // The rows may have stale copies on disk (see LoadFromDisk). A copy is
  // older than its memory row, so it reads as expired from now on anyway;
  // deleting it keeps disk_rows exact and the disk small.
  NoteDiskChange(shard, keys);
  Status deleted = disk_->Delete(keys);
  if (!deleted.ok()) {
    LOG_EVERY_N(WARNING, 100) << "TTL eviction: cannot delete " << keys.size()
                              << " stale rows from the disk tier: " << deleted;
    // Counted as expired rows on disk not yet looked at (an upper bound:
    // some of the keys may have had no copy).
    shard.next.disk_rows += static_cast<int64_t>(keys.size());
  }
}

}  // namespace ember::embedding::internal
