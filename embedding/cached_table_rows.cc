// The stored rows of internal::CachedTable (Scan, ReadRows, WriteRows,
// EraseRows, TakeChanges, row_meta), across the cache and the tier behind
// it. Their callers guarantee that no Pull, Push or Prefetch runs
// concurrently (but for row_meta); each first waits until the Prefetch
// loaders are idle.

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include <glog/logging.h>

#include "core/mutex.h"
#include "core/random.h"
#include "core/status.h"
#include "embedding/internal/cached_table.h"

namespace ember::embedding::internal {

std::optional<RowMeta> CachedTable::row_meta(Key key) const {
  const uint64_t hash = Mix64(key);
  const Shard& shard = cache_.shard(cache_.ShardOf(hash));
  MutexLock lock(shard.mu);
  if (std::optional<RowMeta> meta = cache_.ResidentMeta(shard, key, hash)) return meta;
  if (disk_ == nullptr) return std::nullopt;
  ShardIo io;
  io.keys.push_back(key);
  if (!ReadDiskRows(&shard, io).ok() || io.slots[0] < 0) return std::nullopt;
  const StoredMeta meta =
      ReadMeta(reinterpret_cast<const float*>(io.rows.data()) + cache_.meta_offset());
  return RowMeta{meta.frequency, meta.last_seen_step};
}

Status CachedTable::Scan(const RowVisitor& visit) {
  WaitForPrefetch();
  EMBER_RETURN_IF_ERROR(cache_.ScanResident(visit));
  if (disk_ == nullptr) return Status::OK();
  const int64_t row_floats = cache_.row_floats();
  std::vector<float> row(row_floats);
  std::vector<float> stored(cache_.stored_row_floats());
  return disk_->Scan([&](Key key, const char* bytes) -> Status {
    std::memcpy(row.data(), bytes, sizeof(float) * row_floats);
    if (ExpiredOnDisk(row.data() + cache_.meta_offset())) return Status::OK();
    const uint64_t hash = Mix64(key);
    {
      // A row loaded into the cache keeps a stale copy on disk; the cache's
      // row is the key's row and was visited above.
      const Shard& shard = cache_.shard(cache_.ShardOf(hash));
      MutexLock lock(shard.mu);
      if (shard.index.Find(key, hash) >= 0) return Status::OK();
    }
    cache_.ExpandRow(row.data(), stored.data());
    return visit(key, stored.data());
  });
}

Status CachedTable::ReadRows(const std::vector<Key>& keys, float* rows,
                             std::vector<int64_t>* missing) {
  WaitForPrefetch();
  missing->clear();
  if (keys.empty()) return Status::OK();
  if (rows == nullptr) {
    return Status::InvalidArgument("ReadRows: rows is null for ", keys.size(), " keys");
  }
  GroupedBatch batch(cache_.batches(), keys);
  const int64_t row_floats = cache_.stored_row_floats();
  const size_t held_bytes = sizeof(float) * cache_.row_floats();
  // batch.rows[k] marks found keys (non-null) for the pass below. The keys
  // the cache lacks are read from the tier behind, if there is one.
  Status status = ForEachShardByResidence(
      *batch,
      [&](const Shard& shard, const ShardIo*, int64_t k, int64_t slot) {
        float* dst = rows + batch->positions[k] * row_floats;
        cache_.ExpandRow(shard.rows.row(slot), dst);
        batch->rows[k] = dst;
      },
      [&](const Shard&, ShardIo* io, int64_t k) {
        batch->rows[k] = nullptr;
        if (io == nullptr) return;
        io->keys.push_back(batch->keys[k]);
        io->positions.push_back(k);
      },
      [&](const Shard& shard, ShardIo* io) -> Status {
        if (io == nullptr || io->keys.empty()) return Status::OK();
        EMBER_RETURN_IF_ERROR(ReadDiskRows(&shard, *io));
        for (size_t i = 0; i < io->keys.size(); ++i) {
          if (io->slots[i] < 0) continue;
          const int64_t k = io->positions[i];
          float* dst = rows + batch->positions[k] * row_floats;
          cache_.ExpandRow(reinterpret_cast<const float*>(io->rows.data() + i * held_bytes), dst);
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

Status CachedTable::WriteRows(const std::vector<Key>& keys, const float* rows) {
  WaitForPrefetch();
  if (keys.empty()) return Status::OK();
  if (rows == nullptr) {
    return Status::InvalidArgument("WriteRows: rows is null for ", keys.size(), " keys");
  }
  GroupedBatch batch(cache_.batches(), keys);
  const int64_t row_floats = cache_.stored_row_floats();
  // Rows the cache holds are overwritten there; with a tier behind, the
  // others go straight to it, so that the budget holds.
  return ForEachShardByResidence(
      *batch,
      [&](Shard& shard, const ShardIo*, int64_t k, int64_t slot) {
        cache_.WriteRow(shard, slot, batch->keys[k], batch->hashes[k],
                        rows + batch->positions[k] * row_floats);
      },
      [&](Shard& shard, ShardIo* io, int64_t k) {
        if (io == nullptr) {
          cache_.WriteRow(shard, -1, batch->keys[k], batch->hashes[k],
                          rows + batch->positions[k] * row_floats);
          return;
        }
        io->keys.push_back(batch->keys[k]);
        io->positions.push_back(k);
      },
      [&](Shard& shard, ShardIo* io) -> Status {
        if (io == nullptr) return Status::OK();
        if (!io->keys.empty()) EMBER_RETURN_IF_ERROR(WriteToDisk(shard, *batch, *io, rows));
        return WriteBack(shard, *io);
      });
}

Status CachedTable::WriteToDisk(Shard& shard, const BatchScratch& batch, ShardIo& io,
                                const float* rows) const {
  const int64_t row_floats = cache_.stored_row_floats();
  const int64_t meta_offset = cache_.meta_offset();
  const size_t row_bytes = sizeof(float) * cache_.row_floats();
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
    cache_.CompactRow(rows + batch.positions[io.positions[i]] * row_floats,
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
  cache_.RecordChanged(shard, io.keys);
  return Status::OK();
}

Status CachedTable::EraseRows(const std::vector<Key>& keys) {
  WaitForPrefetch();
  if (keys.empty()) return Status::OK();
  GroupedBatch batch(cache_.batches(), keys);
  // Without a tier behind, the cache's rows go at once. With one, the keys
  // in the cache (io.loaded) and those it lacks (io.keys) are deleted from
  // the tier first (see EraseFromDisk).
  return ForEachShardByResidence(
      *batch,
      [&](Shard& shard, ShardIo* io, int64_t k, int64_t slot) {
        if (io != nullptr) {
          io->loaded.push_back(batch->keys[k]);
          return;
        }
        cache_.RemoveSlot(shard, slot);
        cache_.RecordRemoved(shard, batch->keys[k]);
      },
      [&](Shard&, ShardIo* io, int64_t k) {
        if (io != nullptr) io->keys.push_back(batch->keys[k]);
      },
      [&](Shard& shard, ShardIo* io) -> Status {
        if (io != nullptr) return EraseFromDisk(shard, *io);
        shard.index.ShrinkIfSparse();
        return Status::OK();
      });
}

Status CachedTable::EraseFromDisk(Shard& shard, ShardIo& io) const {
  // A cache row may have a stale copy on disk, so every key in the cache is
  // deleted from disk too; so are the keys only on disk. The cache changes
  // only after the Delete succeeded.
  const size_t row_bytes = sizeof(float) * cache_.row_floats();
  const size_t in_cache = io.loaded.size();
  if (!io.keys.empty()) {
    // Keys the filter rules out are in neither level.
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
  for (size_t i = 0; i < in_cache; ++i) {
    const Key key = io.loaded[i];
    const int64_t slot = shard.index.Find(key, Mix64(key));
    if (slot >= 0) cache_.RemoveSlot(shard, slot);
  }
  shard.index.ShrinkIfSparse();
  shard.next.disk_rows -= static_cast<int64_t>(io.loaded.size() - in_cache);
  cache_.RecordRemoved(shard, io.loaded);
  return Status::OK();
}

void CachedTable::TakeChanges(std::vector<Key>* changed, std::vector<Key>* removed) {
  WaitForPrefetch();
  if (disk_ == nullptr) {
    cache_.TakeChanges(changed, removed, nullptr);
    return;
  }
  // Of the keys the cache lacks, those the disk does not hold either are
  // gone.
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
  cache_.TakeChanges(changed, removed, gone);
}

}  // namespace ember::embedding::internal
