// The disk side of internal::TieredTable, one shard at a time under the
// memory tier's lock of that shard: loading the rows a batch needs, writing
// back the memory tier's victims, and TTL of disk rows. See
// embedding/tiered_table.h for the design.

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

#include <glog/logging.h>

#include "core/mutex.h"
#include "core/random.h"
#include "core/status.h"
#include "embedding/internal/tiered_table.h"

namespace ember::embedding::internal {

bool TieredTable::ExpiredOnDisk(const float* meta) const {
  const int64_t ttl_steps = memory_.options().ttl_steps;
  if (ttl_steps == 0) return false;
  const int64_t evict_step = memory_.last_eviction_step();
  if (evict_step == std::numeric_limits<int64_t>::min()) return false;
  return evict_step - ReadMeta(meta).last_seen_step > ttl_steps;
}

Status TieredTable::LoadFromDisk(Shard& shard, Access access, ShardIo& io) const {
  const int64_t n = static_cast<int64_t>(io.keys.size());
  const int64_t row_bytes = sizeof(float) * memory_.row_floats();
  const int64_t meta_offset = memory_.meta_offset();
  io.slots.assign(n, -1);
  io.loaded.clear();
  // Rows are inserted at the end of the arena, so a failure undoes them by
  // removing the last `inserted` slots.
  int64_t inserted = 0;
  auto undo = [&] {
    for (; inserted > 0; --inserted) memory_.RemoveSlot(shard, shard.rows.size() - 1);
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
        std::memcpy(meta, io.rows.data() + i * row_bytes + meta_offset * sizeof(float),
                    sizeof(meta));
        if (ExpiredOnDisk(meta)) {
          io.loaded.push_back(io.chunk_keys[i]);
          continue;
        }
        // InsertRow copies with memcpy, so the byte buffer needs no alignment.
        io.slots[begin + i] =
            memory_.InsertRow(shard, io.chunk_keys[i], Mix64(io.chunk_keys[i]),
                              reinterpret_cast<const float*>(io.rows.data() + i * row_bytes));
        ++inserted;
      }
    }
  } catch (const std::bad_alloc&) {
    undo();
    throw;
  }
  if (!io.loaded.empty()) {
    ++shard.next.version;
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
  memory_.RecordRemoved(shard, io.loaded);
  return Status::OK();
}

Status TieredTable::WriteBack(Shard& shard, ShardIo& io) const {
  const MemoryBudget& budget = memory_.budget();
  const int64_t row_bytes = sizeof(float) * memory_.row_floats();
  const int64_t meta_offset = memory_.meta_offset();
  const int64_t step = memory_.step();
  // A second round is needed only when shrinking the index did not free
  // what the first round counted on.
  for (int round = 0; round < 2 && budget.OverBudget(shard); ++round) {
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
      ++shard.next.version;
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

Status TieredTable::ReadDiskRows(ShardIo& io) const {
  const int64_t n = static_cast<int64_t>(io.keys.size());
  const int64_t row_bytes = sizeof(float) * memory_.row_floats();
  const int64_t meta_offset = memory_.meta_offset();
  io.rows.resize(n * row_bytes);
  io.slots.resize(n);
  for (int64_t i = 0; i < n; ++i) io.slots[i] = i;
  EMBER_RETURN_IF_ERROR(disk_->Get(io.keys, io.rows.data(), &io.absent));
  for (int64_t i : io.absent) io.slots[i] = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (io.slots[i] < 0) continue;
    alignas(float) float meta[kMetaFloats];
    std::memcpy(meta, io.rows.data() + i * row_bytes + meta_offset * sizeof(float), sizeof(meta));
    if (ExpiredOnDisk(meta)) io.slots[i] = -1;
  }
  return Status::OK();
}

void TieredTable::DeleteExpiredCopies(Shard& shard, const std::vector<Key>& keys) const {
  // The rows may have stale copies on disk (see LoadFromDisk). A copy is
  // older than its memory row, so it reads as expired from now on anyway;
  // deleting it keeps disk_rows exact and the disk small.
  ++shard.next.version;
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
