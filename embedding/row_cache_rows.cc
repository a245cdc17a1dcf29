// The stored rows of the row cache: scanning them, the admission state and
// the change lists (see embedding/internal/row_cache.h). Callers ensure
// that nothing else uses the table meanwhile (embedding/stored_rows.h).

#include <algorithm>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "core/mutex.h"
#include "core/random.h"
#include "core/status.h"
#include "embedding/internal/row_cache.h"

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

Status RowCache::ScanResident(const RowVisitor& visit) const {
  const bool widen = stored_row_floats_ != row_floats_;
  std::vector<float> stored(widen ? stored_row_floats_ : 0);
  for (const auto& shard : shards_) {
    MutexLock lock(shard->mu);
    for (int64_t slot = 0; slot < shard->rows.size(); ++slot) {
      const float* row = shard->rows.row(slot);
      if (widen) ExpandRow(row, stored.data());
      EMBER_RETURN_IF_ERROR(visit(ReadMeta(row + meta_offset_).key, widen ? stored.data() : row));
    }
  }
  return Status::OK();
}

Status RowCache::SaveAdmissionState(std::string* out) const {
  out->clear();
  for (const auto& shard : shards_) {
    MutexLock lock(shard->mu);
    if (shard->sketch != nullptr) shard->sketch->AppendCounters(out);
  }
  return Status::OK();
}

Status RowCache::RestoreAdmissionState(std::string_view state) {
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

void RowCache::TakeChanges(std::vector<Key>* changed, std::vector<Key>* removed,
                             const GoneFn& gone_fn) {
  changed->clear();
  removed->clear();
  std::vector<Key> both;
  std::vector<Key> not_in_memory;
  std::vector<Key> gone;
  std::vector<Key> kept;
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
    not_in_memory.clear();
    for (Key key : both) {
      if (shard.index.Find(key, Mix64(key)) < 0) not_in_memory.push_back(key);
    }
    if (!not_in_memory.empty()) {
      if (gone_fn) {
        gone_fn(shard, not_in_memory, &gone);
      } else {
        gone = not_in_memory;
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
