// NewMemoryTable: a memory tier alone (see embedding/internal/memory_table.h).

#include "embedding/internal/memory_table.h"

#include <algorithm>
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
#include "embedding/internal/table_options.h"

namespace ember::embedding {
namespace internal {
namespace {

RowCacheOptions TierOptions(const EmbeddingTableOptions& options) {
  RowCacheOptions tier;
  tier.table = options;
  tier.overhead_bytes = MemoryTable::OverheadBytes(options.num_shards);
  return tier;
}

}  // namespace

MemoryTable::MemoryTable(const EmbeddingTableOptions& options) : memory_(TierOptions(options)) {}

int64_t MemoryTable::OverheadBytes(int num_shards) {
  return static_cast<int64_t>(sizeof(MemoryTable)) + int64_t{num_shards} * sizeof(void*);
}

Status MemoryTable::Pull(const std::vector<Key>& keys, float* out) {
  if (keys.empty()) return Status::OK();
  if (out == nullptr) {
    return Status::InvalidArgument("Pull: out is null for ", keys.size(), " keys");
  }
  std::unique_ptr<BatchScratch> batch = memory_.batches().GroupForPull(keys);
  const int64_t step = memory_.step();
  Status status = memory_.ForEachShard(*batch, [&](int s) -> Status {
    Shard& shard = memory_.shard(s);
    MutexLock lock(shard.mu);
    memory_.ResolveRows(shard, s, Access::kPull, step, *batch);
    memory_.CopyOut(shard, s, *batch, step, out);
    return Status::OK();
  });
  // A Push of these keys can reuse this grouping and, where no row moved
  // since, these rows.
  if (status.ok()) {
    memory_.batches().Keep(BatchScratchPool::Kept::kResolvedPull, keys, std::move(batch));
  } else {
    memory_.batches().Return(std::move(batch));
  }
  return status;
}

Status MemoryTable::Push(const std::vector<Key>& keys, const float* grads) {
  if (keys.empty()) return Status::OK();
  if (grads == nullptr) {
    return Status::InvalidArgument("Push: grads is null for ", keys.size(), " keys");
  }
  BatchScratchPool& batches = memory_.batches();
  std::unique_ptr<BatchScratch> batch =
      batches.TakeKept(BatchScratchPool::Kept::kResolvedPull, keys);
  const bool pulled = batch != nullptr;
  if (!pulled) {
    batch = batches.Take();
    batches.Group(keys, *batch);
  }
  const int64_t step = memory_.step();
  Status status = memory_.ForEachShard(*batch, [&](int s) -> Status {
    Shard& shard = memory_.shard(s);
    MutexLock lock(shard.mu);
    // The Pull's rows hold when they all existed and none has moved since
    // (rows move only when a row is removed); else resolve as for any Push.
    if (!pulled || !batch->all_rows[s] || batch->removals[s] != shard.rows.removals()) {
      memory_.ResolveRows(shard, s, Access::kPush, step, *batch);
    }
    memory_.ApplyGradients(shard, s, *batch, grads);
    return Status::OK();
  });
  batches.Return(std::move(batch));
  return status;
}

Status MemoryTable::Lookup(const std::vector<Key>& keys, float* out) {
  if (keys.empty()) return Status::OK();
  if (out == nullptr) {
    return Status::InvalidArgument("Lookup: out is null for ", keys.size(), " keys");
  }
  BatchScratchPool& batches = memory_.batches();
  GroupedBatch batch(batches, keys);
  const int dim = memory_.dim();
  Status status = memory_.ForEachShard(*batch, [&](int s) -> Status {
    Shard& shard = memory_.shard(s);
    MutexLock lock(shard.mu);
    memory_.SplitByResidence(
        shard, s, *batch,
        [&](int64_t k, int64_t slot) {
          memory_.LoadRowWeights(shard.rows.row(slot), out + batch->positions[k] * dim);
        },
        [&](int64_t k) { memory_.ReadAbsent(batch->keys[k], out + batch->positions[k] * dim); });
    return Status::OK();
  });
  return status;
}

TableStats MemoryTable::stats() const {
  TableStats stats = memory_.BaseStats();
  for (int s = 0; s < memory_.num_shards(); ++s) {
    const Shard& shard = memory_.shard(s);
    MutexLock lock(shard.mu);
    memory_.AddShardStats(shard, &stats);
  }
  return stats;
}

std::optional<RowMeta> MemoryTable::row_meta(Key key) const {
  const uint64_t hash = Mix64(key);
  const Shard& shard = memory_.shard(memory_.ShardOf(hash));
  MutexLock lock(shard.mu);
  return memory_.ResidentMeta(shard, key, hash);
}

Status MemoryTable::ReadRows(const std::vector<Key>& keys, float* rows,
                             std::vector<int64_t>* missing) {
  missing->clear();
  if (keys.empty()) return Status::OK();
  if (rows == nullptr) {
    return Status::InvalidArgument("ReadRows: rows is null for ", keys.size(), " keys");
  }
  BatchScratchPool& batches = memory_.batches();
  GroupedBatch batch(batches, keys);
  const int64_t row_floats = memory_.stored_row_floats();
  // batch.rows[k] marks found keys (non-null) for the pass below.
  Status status = memory_.ForEachShard(*batch, [&](int s) -> Status {
    Shard& shard = memory_.shard(s);
    MutexLock lock(shard.mu);
    memory_.SplitByResidence(
        shard, s, *batch,
        [&](int64_t k, int64_t slot) {
          float* dst = rows + batch->positions[k] * row_floats;
          memory_.ExpandRow(shard.rows.row(slot), dst);
          batch->rows[k] = dst;
        },
        [&](int64_t k) { batch->rows[k] = nullptr; });
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

Status MemoryTable::WriteRows(const std::vector<Key>& keys, const float* rows) {
  if (keys.empty()) return Status::OK();
  if (rows == nullptr) {
    return Status::InvalidArgument("WriteRows: rows is null for ", keys.size(), " keys");
  }
  BatchScratchPool& batches = memory_.batches();
  GroupedBatch batch(batches, keys);
  const int64_t row_floats = memory_.stored_row_floats();
  Status status = memory_.ForEachShard(*batch, [&](int s) -> Status {
    Shard& shard = memory_.shard(s);
    MutexLock lock(shard.mu);
    memory_.SplitByResidence(
        shard, s, *batch,
        [&](int64_t k, int64_t slot) {
          memory_.WriteRow(shard, slot, batch->keys[k], batch->hashes[k],
                           rows + batch->positions[k] * row_floats);
        },
        [&](int64_t k) {
          memory_.WriteRow(shard, -1, batch->keys[k], batch->hashes[k],
                           rows + batch->positions[k] * row_floats);
        });
    return Status::OK();
  });
  return status;
}

Status MemoryTable::EraseRows(const std::vector<Key>& keys) {
  if (keys.empty()) return Status::OK();
  BatchScratchPool& batches = memory_.batches();
  GroupedBatch batch(batches, keys);
  Status status = memory_.ForEachShard(*batch, [&](int s) -> Status {
    Shard& shard = memory_.shard(s);
    MutexLock lock(shard.mu);
    for (int64_t k = batch->begin[s]; k < batch->begin[s + 1]; ++k) {
      const int64_t slot = shard.index.Find(batch->keys[k], batch->hashes[k]);
      if (slot < 0) continue;
      memory_.RemoveSlot(shard, slot);
      memory_.RecordRemoved(shard, batch->keys[k]);
    }
    shard.index.ShrinkIfSparse();
    return Status::OK();
  });
  return status;
}

int64_t MemoryTable::eviction_step() const {
  const int64_t step = memory_.last_eviction_step();
  return step == std::numeric_limits<int64_t>::min() ? -1 : step;
}

void MemoryTable::RestoreEvictionStep(int64_t step) {
  if (step >= 0) memory_.EvictExpiredAt(step, nullptr);
}

}  // namespace internal

Result<std::unique_ptr<EmbeddingTable>> NewMemoryTable(const EmbeddingTableOptions& options) {
  EMBER_RETURN_IF_ERROR(internal::ValidateTableOptions(options));
  if (options.memory_budget_bytes != 0) {
    return Status::InvalidArgument("NewMemoryTable: memory_budget_bytes must be 0, got ",
                                   options.memory_budget_bytes,
                                   "; use NewEmbeddingTable for a table with a disk tier");
  }
  try {
    return std::unique_ptr<EmbeddingTable>(std::make_unique<internal::MemoryTable>(options));
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("embedding table: out of memory creating ", options.num_shards,
                                     " shards");
  }
}

}  // namespace ember::embedding
