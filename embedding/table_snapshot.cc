// The snapshot methods of internal::MemoryTable (Scan, ReadRows, WriteRows,
// EraseRows, TakeChanges), used by checkpoints. Their callers guarantee that
// no Pull, Push or Prefetch runs concurrently; each first waits until the
// Prefetch loaders are idle.

#include <algorithm>
#include <cstring>
#include <iterator>
#include <vector>

#include <glog/logging.h>

#include "core/mutex.h"
#include "core/random.h"
#include "core/status.h"
#include "embedding/internal/memory_table.h"

namespace ember::embedding::internal {
namespace {

// Changed keys kept in a shard's list after TakeChanges before the list's
// memory is returned.
constexpr size_t kKeepChangeCapacity = 256;

void SortUnique(std::vector<Key>& keys) {
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
}

void ClearChangeList(std::vector<Key>& keys) {
  if (keys.capacity() > kKeepChangeCapacity) {
    std::vector<Key>().swap(keys);
  } else {
    keys.clear();
  }
}

}  // namespace

Status MemoryTable::SaveAdmissionState(std::string* out) {
  out->clear();
  for (const auto& shard : shards_) {
    MutexLock lock(shard->mu);
    if (shard->sketch != nullptr) shard->sketch->AppendCounters(out);
  }
  return Status::OK();
}

Status MemoryTable::RestoreAdmissionState(std::string_view state) {
  int64_t expected = 0;
  for (const auto& shard : shards_) {
    MutexLock lock(shard->mu);
    if (shard->sketch != nullptr) expected += shard->sketch->bytes();
  }
  if (static_cast<int64_t>(state.size()) != expected) {
    return Status::InvalidArgument("admission state of ", state.size(), " bytes, this table's is ",
                                   expected, " (other admission options or shards)");
  }
  for (const auto& shard : shards_) {
    MutexLock lock(shard->mu);
    if (shard->sketch == nullptr) continue;
    const int64_t bytes = shard->sketch->bytes();
    shard->sketch->LoadCounters(state.substr(0, bytes));
    state.remove_prefix(bytes);
  }
  return Status::OK();
}

Status MemoryTable::Scan(const RowVisitor& visit) {
  WaitForPrefetch();
  for (const auto& shard : shards_) {
    MutexLock lock(shard->mu);
    for (int64_t slot = 0; slot < shard->rows.size(); ++slot) {
      const float* row = shard->rows.row(slot);
      EMBER_RETURN_IF_ERROR(visit(ReadMeta(row + meta_offset_).key, row));
    }
  }
  if (disk_ == nullptr) return Status::OK();
  std::vector<float> row(row_floats_);
  return disk_->Scan([&](Key key, const char* bytes) -> Status {
    std::memcpy(row.data(), bytes, sizeof(float) * row_floats_);
    if (ExpiredOnDisk(row.data() + meta_offset_)) return Status::OK();
    const uint64_t hash = Mix64(key);
    {
      // A row loaded into memory keeps a stale copy on disk; memory's row
      // is the key's row and was visited above.
      Shard& shard = *shards_[hash % static_cast<uint64_t>(num_shards_)];
      MutexLock lock(shard.mu);
      if (shard.index.Find(key, hash) >= 0) return Status::OK();
    }
    return visit(key, row.data());
  });
}

Status MemoryTable::ReadRows(const std::vector<Key>& keys, float* rows,
                             std::vector<int64_t>* missing) {
  WaitForPrefetch();
  missing->clear();
  if (keys.empty()) return Status::OK();
  if (rows == nullptr) {
    return Status::InvalidArgument("ReadRows: rows is null for ", keys.size(), " keys");
  }
  std::unique_ptr<BatchScratch> batch = TakeScratch();
  Group(keys, *batch);
  const size_t row_bytes = sizeof(float) * row_floats_;
  // batch.rows[k] marks found keys (non-null) for the pass below.
  Status status = ForEachShard(*batch, [&](int s) -> Status {
    Shard& shard = *shards_[s];
    MutexLock lock(shard.mu);
    std::fill(batch->rows.begin() + batch->begin[s], batch->rows.begin() + batch->begin[s + 1],
              nullptr);
    ShardIo* io = SplitByTier(
        shard, s, *batch,
        [&](int64_t k, int64_t slot) {
          float* dst = rows + batch->positions[k] * row_floats_;
          std::memcpy(dst, shard.rows.row(slot), row_bytes);
          batch->rows[k] = dst;
        },
        [](int64_t) {});
    if (io == nullptr || io->keys.empty()) return Status::OK();
    EMBER_RETURN_IF_ERROR(ReadDiskRows(*io));
    for (size_t i = 0; i < io->keys.size(); ++i) {
      if (io->slots[i] < 0) continue;
      const int64_t k = io->positions[i];
      float* dst = rows + batch->positions[k] * row_floats_;
      std::memcpy(dst, io->rows.data() + i * row_bytes, row_bytes);
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
  ReturnScratch(std::move(batch));
  return status;
}

Status MemoryTable::WriteRows(const std::vector<Key>& keys, const float* rows) {
  WaitForPrefetch();
  if (keys.empty()) return Status::OK();
  if (rows == nullptr) {
    return Status::InvalidArgument("WriteRows: rows is null for ", keys.size(), " keys");
  }
  std::unique_ptr<BatchScratch> batch = TakeScratch();
  Group(keys, *batch);
  const size_t row_bytes = sizeof(float) * row_floats_;
  Status status = ForEachShard(*batch, [&](int s) -> Status {
    Shard& shard = *shards_[s];
    MutexLock lock(shard.mu);
    auto written = [&](int64_t k, int64_t slot) {
      float* row = shard.rows.row(slot);
      StoredMeta meta = ReadMeta(row + meta_offset_);
      meta.key = batch->keys[k];  // the row's key is the caller's, whatever the row says
      WriteMeta(meta, row + meta_offset_);
      MarkChanged(shard, row);
    };
    // With a disk tier, rows not in memory go straight to disk: the budget
    // holds.
    ShardIo* io = SplitByTier(
        shard, s, *batch,
        [&](int64_t k, int64_t slot) {
          std::memcpy(shard.rows.row(slot), rows + batch->positions[k] * row_floats_, row_bytes);
          written(k, slot);
        },
        [&](int64_t k) {
          written(k, InsertRow(shard, batch->keys[k], batch->hashes[k],
                               rows + batch->positions[k] * row_floats_));
        });
    if (io == nullptr) return Status::OK();
    if (!io->keys.empty()) {
      const int64_t n = static_cast<int64_t>(io->keys.size());
      // Which keys are new to disk, for disk_rows.
      io->rows.resize(n * row_bytes);
      EMBER_RETURN_IF_ERROR(disk_->Get(io->keys, io->rows.data(), &io->absent));
      for (int64_t i = 0; i < n; ++i) {
        char* dst = io->rows.data() + i * row_bytes;
        std::memcpy(dst, rows + batch->positions[io->positions[i]] * row_floats_, row_bytes);
        StoredMeta meta;
        float meta_floats[kMetaFloats];
        std::memcpy(meta_floats, dst + meta_offset_ * sizeof(float), sizeof(meta_floats));
        meta = ReadMeta(meta_floats);
        meta.key = io->keys[i];
        WriteMeta(meta, meta_floats);
        std::memcpy(dst + meta_offset_ * sizeof(float), meta_floats, sizeof(meta_floats));
      }
      ++shard.disk_version;
      EMBER_RETURN_IF_ERROR(disk_->Put(io->keys, io->rows.data()));
      shard.counters.disk_rows += static_cast<int64_t>(io->absent.size());
      shard.counters.disk_writes += n;
      if (options_.track_changes) {
        shard.changed.insert(shard.changed.end(), io->keys.begin(), io->keys.end());
      }
    }
    return EnforceBudget(shard, *io);
  });
  ReturnScratch(std::move(batch));
  return status;
}

Status MemoryTable::EraseRows(const std::vector<Key>& keys) {
  WaitForPrefetch();
  if (keys.empty()) return Status::OK();
  std::unique_ptr<BatchScratch> batch = TakeScratch();
  Group(keys, *batch);
  Status status = ForEachShard(*batch, [&](int s) -> Status {
    Shard& shard = *shards_[s];
    MutexLock lock(shard.mu);
    const int64_t end = batch->begin[s + 1];
    if (disk_ == nullptr) {
      for (int64_t k = batch->begin[s]; k < end; ++k) {
        const int64_t slot = shard.index.Find(batch->keys[k], batch->hashes[k]);
        if (slot < 0) continue;
        RemoveSlot(shard, slot);
        if (options_.track_changes) shard.removed.push_back(batch->keys[k]);
      }
      shard.index.ShrinkIfSparse();
      return Status::OK();
    }
    // With a disk tier a memory row may have a stale copy on disk, so every
    // key in memory is deleted from disk too; so are the keys only on disk.
    // Memory changes only after the Delete succeeded.
    ShardIo& io = batch->io[s];
    io.keys.clear();
    io.loaded.clear();
    for (int64_t k = batch->begin[s]; k < end; ++k) {
      if (shard.index.Find(batch->keys[k], batch->hashes[k]) >= 0) {
        io.loaded.push_back(batch->keys[k]);
      } else {
        io.keys.push_back(batch->keys[k]);
      }
    }
    const size_t in_memory = io.loaded.size();
    if (!io.keys.empty()) {
      const int64_t n = static_cast<int64_t>(io.keys.size());
      io.rows.resize(n * sizeof(float) * row_floats_);
      EMBER_RETURN_IF_ERROR(disk_->Get(io.keys, io.rows.data(), &io.absent));
      size_t next_absent = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (next_absent < io.absent.size() && io.absent[next_absent] == i) {
          ++next_absent;
          continue;
        }
        io.loaded.push_back(io.keys[i]);
      }
    }
    if (io.loaded.empty()) return Status::OK();
    ++shard.disk_version;
    EMBER_RETURN_IF_ERROR(disk_->Delete(io.loaded));
    for (size_t i = 0; i < in_memory; ++i) {
      const Key key = io.loaded[i];
      const int64_t slot = shard.index.Find(key, Mix64(key));
      if (slot >= 0) RemoveSlot(shard, slot);
    }
    shard.index.ShrinkIfSparse();
    shard.counters.disk_rows -= static_cast<int64_t>(io.loaded.size() - in_memory);
    if (options_.track_changes) {
      shard.removed.insert(shard.removed.end(), io.loaded.begin(), io.loaded.end());
    }
    return Status::OK();
  });
  ReturnScratch(std::move(batch));
  return status;
}

void MemoryTable::TakeChanges(std::vector<Key>* changed, std::vector<Key>* removed) {
  WaitForPrefetch();
  changed->clear();
  removed->clear();
  std::vector<Key> both;
  std::vector<Key> gone;
  std::vector<Key> kept;
  ShardIo io;
  for (const auto& shard_ptr : shards_) {
    Shard& shard = *shard_ptr;
    MutexLock lock(shard.mu);
    SortUnique(shard.changed);
    SortUnique(shard.removed);
    both.clear();
    std::set_intersection(shard.changed.begin(), shard.changed.end(), shard.removed.begin(),
                          shard.removed.end(), std::back_inserter(both));
    // A key both changed and removed since the last call is reported by
    // what it is now: changed if it has a row, removed if not.
    gone.clear();
    io.keys.clear();
    for (Key key : both) {
      if (shard.index.Find(key, Mix64(key)) < 0) io.keys.push_back(key);
    }
    if (!io.keys.empty()) {
      if (disk_ == nullptr) {
        gone = io.keys;
      } else if (Status read = ReadDiskRows(io); !read.ok()) {
        // Reporting them as changed is safe: a checkpoint reads them again
        // and finds out.
        LOG(WARNING) << "TakeChanges: cannot read " << io.keys.size()
                     << " keys from the disk tier, reporting them as changed: " << read;
      } else {
        for (size_t i = 0; i < io.keys.size(); ++i) {
          if (io.slots[i] < 0) gone.push_back(io.keys[i]);
        }
      }
    }
    kept.clear();
    std::set_difference(both.begin(), both.end(), gone.begin(), gone.end(),
                        std::back_inserter(kept));
    std::set_difference(shard.changed.begin(), shard.changed.end(), gone.begin(), gone.end(),
                        std::back_inserter(*changed));
    std::set_difference(shard.removed.begin(), shard.removed.end(), kept.begin(), kept.end(),
                        std::back_inserter(*removed));
    ClearChangeList(shard.changed);
    ClearChangeList(shard.removed);
    // Rows marked with the old epoch count as unmarked from now on. After
    // 2^32 - 1 calls an old mark could match again; a key then missing from
    // one call's list would be an unrealistically long-lived one.
    if (++shard.epoch == 0) shard.epoch = 1;
  }
  std::sort(changed->begin(), changed->end());
  std::sort(removed->begin(), removed->end());
}

}  // namespace ember::embedding::internal
