// The stored rows of internal::TieredTable (Scan, ReadRows, WriteRows,
// EraseRows, TakeChanges, row_meta), across both tiers. Their callers
// guarantee that no Pull, Push or Prefetch runs concurrently (but for
// row_meta); each first waits until the Prefetch loaders are idle.

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include <glog/logging.h>

#include "core/mutex.h"
#include "core/random.h"
#include "core/status.h"
#include "embedding/internal/tiered_table.h"

namespace ember::embedding::internal {

std::optional<RowMeta> TieredTable::row_meta(Key key) const {
  const uint64_t hash = Mix64(key);
  const Shard& shard = memory_.shard(memory_.ShardOf(hash));
  MutexLock lock(shard.mu);
  if (std::optional<RowMeta> meta = memory_.ResidentMeta(shard, key, hash)) return meta;
  ShardIo io;
  io.keys.push_back(key);
  if (!ReadDiskRows(&shard, io).ok() || io.slots[0] < 0) return std::nullopt;
  const StoredMeta meta =
      ReadMeta(reinterpret_cast<const float*>(io.rows.data()) + memory_.meta_offset());
  return RowMeta{meta.frequency, meta.last_seen_step};
}

Status TieredTable::Scan(const RowVisitor& visit) {
  WaitForPrefetch();
  EMBER_RETURN_IF_ERROR(memory_.ScanResident(visit));
  const int64_t row_floats = memory_.row_floats();
  std::vector<float> row(row_floats);
  std::vector<float> stored(memory_.stored_row_floats());
  return disk_->Scan([&](Key key, const char* bytes) -> Status {
    std::memcpy(row.data(), bytes, sizeof(float) * row_floats);
    if (ExpiredOnDisk(row.data() + memory_.meta_offset())) return Status::OK();
    const uint64_t hash = Mix64(key);
    {
      // A row loaded into memory keeps a stale copy on disk; memory's row
      // is the key's row and was visited above.
      const Shard& shard = memory_.shard(memory_.ShardOf(hash));
      MutexLock lock(shard.mu);
      if (shard.index.Find(key, hash) >= 0) return Status::OK();
    }
    memory_.ExpandRow(row.data(), stored.data());
    return visit(key, stored.data());
  });
}

Status TieredTable::ReadRows(const std::vector<Key>& keys, float* rows,
                             std::vector<int64_t>* missing) {
  WaitForPrefetch();
  missing->clear();
  if (keys.empty()) return Status::OK();
  if (rows == nullptr) {
    return Status::InvalidArgument("ReadRows: rows is null for ", keys.size(), " keys");
  }
  BatchScratchPool& batches = memory_.batches();
  GroupedBatch batch(batches, keys);
  const int64_t row_floats = memory_.stored_row_floats();
  const size_t held_bytes = sizeof(float) * memory_.row_floats();
  // batch.rows[k] marks found keys (non-null) for the pass below.
  Status status = memory_.ForEachShard(*batch, [&](int s) -> Status {
    Shard& shard = memory_.shard(s);
    MutexLock lock(shard.mu);
    ShardIo& io = batch->io[s];
    io.keys.clear();
    io.positions.clear();
    memory_.SplitByResidence(
        shard, s, *batch,
        [&](int64_t k, int64_t slot) {
          float* dst = rows + batch->positions[k] * row_floats;
          memory_.ExpandRow(shard.rows.row(slot), dst);
          batch->rows[k] = dst;
        },
        [&](int64_t k) {
          batch->rows[k] = nullptr;
          io.keys.push_back(batch->keys[k]);
          io.positions.push_back(k);
        });
    if (io.keys.empty()) return Status::OK();
    EMBER_RETURN_IF_ERROR(ReadDiskRows(&shard, io));
    for (size_t i = 0; i < io.keys.size(); ++i) {
      if (io.slots[i] < 0) continue;
      const int64_t k = io.positions[i];
      float* dst = rows + batch->positions[k] * row_floats;
      memory_.ExpandRow(reinterpret_cast<const float*>(io.rows.data() + i * held_bytes), dst);
      batch->rows[k] = dst;
    }
    return Status::OK();
  });
  if (status.ok()) {
    for (size_t k = 0; k < keys.size(); ++k) {
      if (batch->rows[k] == nullptr) missing->push_back(batch->positions[k]);
    }
    std::sort(missing->begin(), missing->end());
  }
  return status;
}

Status TieredTable::WriteRows(const std::vector<Key>& keys, const float* rows) {
  WaitForPrefetch();
  if (keys.empty()) return Status::OK();
  if (rows == nullptr) {
    return Status::InvalidArgument("WriteRows: rows is null for ", keys.size(), " keys");
  }
  BatchScratchPool& batches = memory_.batches();
  GroupedBatch batch(batches, keys);
  const int64_t row_floats = memory_.stored_row_floats();
  const int64_t meta_offset = memory_.meta_offset();
  const size_t row_bytes = sizeof(float) * memory_.row_floats();
  Status status = memory_.ForEachShard(*batch, [&](int s) -> Status {
    Shard& shard = memory_.shard(s);
    MutexLock lock(shard.mu);
    ShardIo& io = batch->io[s];
    io.keys.clear();
    io.positions.clear();
    // Rows memory holds are overwritten there; the others go straight to
    // disk, so that the budget holds.
    memory_.SplitByResidence(
        shard, s, *batch,
        [&](int64_t k, int64_t slot) {
          memory_.WriteRow(shard, slot, batch->keys[k], batch->hashes[k],
                           rows + batch->positions[k] * row_floats);
        },
        [&](int64_t k) {
          io.keys.push_back(batch->keys[k]);
          io.positions.push_back(k);
        });
    if (!io.keys.empty()) {
      const int64_t n = static_cast<int64_t>(io.keys.size());
      // Which keys are new to disk, for disk_rows: those the filter rules
      // out, and those of the others the disk lacks.
      io.rows.resize(n * row_bytes);
      SelectDiskCandidates(shard, io);
      io.chunk_keys.resize(io.candidates.size());
      for (size_t j = 0; j < io.candidates.size(); ++j) {
        io.chunk_keys[j] = io.keys[io.candidates[j]];
      }
      EMBER_RETURN_IF_ERROR(disk_->Get(io.chunk_keys, io.rows.data(), &io.absent));
      const int64_t new_on_disk =
          n - static_cast<int64_t>(io.candidates.size()) + static_cast<int64_t>(io.absent.size());
      for (int64_t i = 0; i < n; ++i) {
        char* dst = io.rows.data() + i * row_bytes;
        // io.rows holds rows at multiples of 4 bytes, as CompactRow needs.
        memory_.CompactRow(rows + batch->positions[io.positions[i]] * row_floats,
                           reinterpret_cast<float*>(dst));
        float meta_floats[kMetaFloats];
        std::memcpy(meta_floats, dst + meta_offset * sizeof(float), sizeof(meta_floats));
        StoredMeta meta = ReadMeta(meta_floats);
        meta.key = io.keys[i];
        WriteMeta(meta, meta_floats);
        std::memcpy(dst + meta_offset * sizeof(float), meta_floats, sizeof(meta_floats));
      }
      AddDiskKeys(shard, io.keys);
      NoteDiskChange(shard, io.keys);
      EMBER_RETURN_IF_ERROR(disk_->Put(io.keys, io.rows.data()));
      shard.next.disk_rows += new_on_disk;
      shard.next.disk_writes += n;
      memory_.RecordChanged(shard, io.keys);
    }
    return WriteBack(shard, io);
  });
  return status;
}

Status TieredTable::EraseRows(const std::vector<Key>& keys) {
  WaitForPrefetch();
  if (keys.empty()) return Status::OK();
  BatchScratchPool& batches = memory_.batches();
  GroupedBatch batch(batches, keys);
  const size_t row_bytes = sizeof(float) * memory_.row_floats();
  Status status = memory_.ForEachShard(*batch, [&](int s) -> Status {
    Shard& shard = memory_.shard(s);
    MutexLock lock(shard.mu);
    // A memory row may have a stale copy on disk, so every key in memory is
    // deleted from disk too; so are the keys only on disk. Memory changes
    // only after the Delete succeeded.
    ShardIo& io = batch->io[s];
    io.keys.clear();
    io.loaded.clear();
    memory_.SplitByResidence(
        shard, s, *batch, [&](int64_t k, int64_t) { io.loaded.push_back(batch->keys[k]); },
        [&](int64_t k) { io.keys.push_back(batch->keys[k]); });
    const size_t in_memory = io.loaded.size();
    if (!io.keys.empty()) {
      // Keys the filter rules out are in neither tier.
      SelectDiskCandidates(shard, io);
      const int64_t n = static_cast<int64_t>(io.candidates.size());
      io.chunk_keys.resize(n);
      for (int64_t j = 0; j < n; ++j) io.chunk_keys[j] = io.keys[io.candidates[j]];
      io.rows.resize(n * row_bytes);
      EMBER_RETURN_IF_ERROR(disk_->Get(io.chunk_keys, io.rows.data(), &io.absent));
      size_t next_absent = 0;
      for (int64_t j = 0; j < n; ++j) {
        if (next_absent < io.absent.size() && io.absent[next_absent] == j) {
          ++next_absent;
          continue;
        }
        io.loaded.push_back(io.chunk_keys[j]);
      }
    }
    if (io.loaded.empty()) return Status::OK();
    NoteDiskChange(shard, io.loaded);
    EMBER_RETURN_IF_ERROR(disk_->Delete(io.loaded));
    for (size_t i = 0; i < in_memory; ++i) {
      const Key key = io.loaded[i];
      const int64_t slot = shard.index.Find(key, Mix64(key));
      if (slot >= 0) memory_.RemoveSlot(shard, slot);
    }
    shard.index.ShrinkIfSparse();
    shard.next.disk_rows -= static_cast<int64_t>(io.loaded.size() - in_memory);
    memory_.RecordRemoved(shard, io.loaded);
    return Status::OK();
  });
  return status;
}

void TieredTable::TakeChanges(std::vector<Key>* changed, std::vector<Key>* removed) {
  WaitForPrefetch();
  // Of the keys memory lacks, those the disk does not hold either are gone.
  ShardIo io;
  auto gone = [&](Shard& shard, const std::vector<Key>& keys, std::vector<Key>* out) {
    io.keys = keys;
    if (Status read = ReadDiskRows(&shard, io); !read.ok()) {
      // Reporting them as changed is safe: a checkpoint reads them again and
      // finds out.
      LOG(WARNING) << "TakeChanges: cannot read " << keys.size()
                   << " keys from the disk tier, reporting them as changed: " << read;
      return;
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      if (io.slots[i] < 0) out->push_back(keys[i]);
    }
  };
  memory_.TakeChanges(changed, removed, gone);
}

}  // namespace ember::embedding::internal
