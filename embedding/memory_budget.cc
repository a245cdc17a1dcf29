// MemoryBudget: the rows that leave a shard of the memory tier over its
// budget, and the pins that keep prefetched rows in (see
// embedding/internal/memory_budget.h).

#include "embedding/internal/memory_budget.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "core/random.h"

namespace ember::embedding::internal {

int64_t MemoryBudget::TargetRows(const Shard& shard) const {
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

int64_t MemoryBudget::SelectVictims(Shard& shard, int64_t step) const {
  const int64_t size = shard.rows.size();
  const int64_t target = TargetRows(shard);
  if (target >= size) return size;
  // The loaders' spills run between a Pull and its Push, so sparing pinned
  // rows matters with Prefetch even under LRU. At most `size` picks are
  // passed over, so a shard full of spared rows still gets within budget.
  if (!shard.pinned.empty()) DropExpiredPins(shard, step);
  int64_t passes_left = size;
  const std::function<bool(int64_t)> spared = [&](int64_t slot) {
    return Spared(shard, slot, step);
  };
  // Move the victims to the end of the arena, coldest last, so that they
  // can be dropped with RemoveLast once they are written back; until then
  // they are ordinary rows outside the policy.
  for (int64_t live = size; live > target; --live) {
    const int64_t victim = shard.policy.PickVictim(shard.rows, live, step, spared, &passes_left);
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
  return target;
}

void MemoryBudget::KeepVictims(Shard& shard, int64_t begin, int64_t end) const {
  for (int64_t slot = end - 1; slot >= begin; --slot) shard.policy.InsertedCold(shard.rows, slot);
}

void MemoryBudget::DropVictims(Shard& shard, const std::vector<Key>& keys) const {
  for (size_t i = keys.size(); i-- > 0;) {
    shard.index.Erase(keys[i], Mix64(keys[i]));
    shard.rows.RemoveLast();
  }
}

void MemoryBudget::Compact(Shard& shard) const {
  if (shard.rows.size() == 0) shard.policy.Clear();
  shard.index.ShrinkIfSparse();
}

void MemoryBudget::Pin(Shard& shard, int s, int64_t until_step, int64_t step,
                       const BatchScratch& batch) const {
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
  if (pinned.size() > old_size) DropExpiredPins(shard, step);
}

void MemoryBudget::Unpin(Shard& shard, int s, const BatchScratch& batch) const {
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

bool MemoryBudget::Spared(const Shard& shard, int64_t slot, int64_t step) const {
  const StoredMeta meta = ReadMeta(shard.rows.row(slot) + meta_offset_);
  if (meta.last_seen_step == step) return true;
  if (shard.pinned.empty()) return false;
  const Key key = meta.key;
  auto it = std::lower_bound(shard.pinned.begin(), shard.pinned.end(), key,
                             [](const PinnedKey& p, Key k) { return p.key < k; });
  return it != shard.pinned.end() && it->key == key && it->until_step >= step;
}

int64_t MemoryBudget::DropExpiredPins(Shard& shard, int64_t step) const {
  std::vector<PinnedKey>& pinned = shard.pinned;
  pinned.erase(std::remove_if(pinned.begin(), pinned.end(),
                              [&](const PinnedKey& p) { return p.until_step < step; }),
               pinned.end());
  if (pinned.empty()) std::vector<PinnedKey>().swap(pinned);
  return static_cast<int64_t>(pinned.size());
}

}  // namespace ember::embedding::internal
