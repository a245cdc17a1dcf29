#pragma once

// The byte budget of the memory tier's shards: which rows leave a shard that
// is over it, and the pins that keep prefetched rows in (see row_cache.h).

#include <cstdint>
#include <vector>

#include "core/mutex.h"
#include "embedding/embedding_table.h"
#include "embedding/internal/batch_scratch.h"
#include "embedding/internal/memory_shard.h"

namespace ember::embedding::internal {

// Each shard may hold shard_budget_bytes (ShardBytes). A shard over it gives
// up its coldest rows by its EvictionPolicy (LRU or LFU), for the tier behind
// to write back; they are chosen here and removed only once written
// (SelectVictims, then DropVictims or KeepVictims). Rows pulled at the
// current step (their Push is coming) and pinned rows (a Prefetch asked for
// them, their Pull is coming) are passed over as long as other rows are
// left: evicting them would only make that Push or Pull read them back. So
// the budget always holds.
//
// Thread safety: every method REQUIRES the mutex of the shard it is given;
// the object itself is immutable.
class MemoryBudget {
 public:
  // `stride_floats` and `meta_offset`: the arena's row layout (see
  // memory_shard.h). shard_budget_bytes 0: no budget (OverBudget is false).
  MemoryBudget(int64_t shard_budget_bytes, int64_t stride_floats, int64_t meta_offset)
      : shard_budget_bytes_(shard_budget_bytes),
        stride_floats_(stride_floats),
        meta_offset_(meta_offset) {}

  int64_t shard_budget_bytes() const { return shard_budget_bytes_; }

  bool OverBudget(const Shard& shard) const REQUIRES(shard.mu) {
    return shard_budget_bytes_ > 0 && ShardBytes(shard) > shard_budget_bytes_;
  }

  // Chooses the rows that must leave for the shard to be within budget at
  // `step` (the table's step), moves them to the end of the arena, coldest
  // last, out of the eviction policy, and returns the first of their slots:
  // the victims are [returned, rows.size()); none when it returns
  // rows.size(). Until DropVictims or KeepVictims they are ordinary rows,
  // indexed and readable, outside the policy.
  int64_t SelectVictims(Shard& shard, int64_t step) const REQUIRES(shard.mu);
  // The victims [begin, end) stay: they go back into the policy as its
  // coldest rows (their write-back failed; the next call tries again).
  void KeepVictims(Shard& shard, int64_t begin, int64_t end) const REQUIRES(shard.mu);
  // Removes the last keys.size() rows of the arena, whose keys are `keys` in
  // slot order (victims that were written back).
  void DropVictims(Shard& shard, const std::vector<Key>& keys) const REQUIRES(shard.mu);
  // After a round of DropVictims: forgets the policy's state if the shard is
  // empty and shrinks its index if it is sparse.
  void Compact(Shard& shard) const REQUIRES(shard.mu);

  // Pins (see PinnedKey) the keys of shard s in `batch` until `until_step`,
  // and drops pins that expired before `step`.
  void Pin(Shard& shard, int s, int64_t until_step, int64_t step, const BatchScratch& batch) const
      REQUIRES(shard.mu);
  // Drops the pins of the keys of shard s in `batch` (their Pull has come).
  void Unpin(Shard& shard, int s, const BatchScratch& batch) const REQUIRES(shard.mu);

 private:
  // The number of rows the shard may keep to be within budget.
  int64_t TargetRows(const Shard& shard) const REQUIRES(shard.mu);
  // Whether eviction should pass over the row at `slot` at `step`: pulled
  // at `step`, or pinned.
  bool Spared(const Shard& shard, int64_t slot, int64_t step) const REQUIRES(shard.mu);
  // Drops pins that expired before `step`; returns how many remain.
  int64_t DropExpiredPins(Shard& shard, int64_t step) const REQUIRES(shard.mu);

  const int64_t shard_budget_bytes_;
  const int64_t stride_floats_;
  const int64_t meta_offset_;
};

}  // namespace ember::embedding::internal
