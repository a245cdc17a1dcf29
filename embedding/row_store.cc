#include "embedding/internal/row_store.h"

#include <algorithm>
#include <bit>
#include <new>
#include <utility>

#include <glog/logging.h>

#include "core/random.h"

namespace ember::embedding {
namespace {

constexpr int64_t kMinIndexCapacity = 16;

}  // namespace

KeyIndex::KeyIndex() { Allocate(kMinIndexCapacity); }

void KeyIndex::Insert(Key key, uint64_t hash, int64_t slot) {
  uint64_t i = Bucket(hash);
  while (entries_[i].slot >= 0) i = (i + 1) & mask_;
  entries_[i] = Entry{key, slot};
  ++size_;
}

int64_t KeyIndex::Position(Key key, uint64_t hash) const {
  for (uint64_t i = Bucket(hash);; i = (i + 1) & mask_) {
    const Entry& entry = entries_[i];
    if (entry.slot < 0) return -1;
    if (entry.key == key) return static_cast<int64_t>(i);
  }
}

void KeyIndex::SetSlot(Key key, uint64_t hash, int64_t slot) {
  const int64_t i = Position(key, hash);
  CHECK_GE(i, 0) << "SetSlot of a key the index does not hold";
  entries_[i].slot = slot;
}

int64_t KeyIndex::Erase(Key key, uint64_t hash) {
  const int64_t found = Position(key, hash);
  if (found < 0) return -1;
  const int64_t slot = entries_[found].slot;
  // Backward shift: walk the cluster after the hole; an entry may fill the
  // hole if its home bucket is not cyclically inside (hole, entry], i.e. if
  // it was displaced past the hole.
  uint64_t hole = static_cast<uint64_t>(found);
  for (uint64_t j = (hole + 1) & mask_; entries_[j].slot >= 0; j = (j + 1) & mask_) {
    const uint64_t home = Bucket(Mix64(entries_[j].key));
    if (((j - home) & mask_) >= ((j - hole) & mask_)) {
      entries_[hole] = entries_[j];
      hole = j;
    }
  }
  entries_[hole].slot = -1;
  --size_;
  return slot;
}

void KeyIndex::ShrinkIfSparse() {
  if (capacity_ <= kMinIndexCapacity || size_ >= capacity_ / 8) return;
  // Rebuild at a load of at most 0.35, half the growth limit, so that the
  // next few inserts do not grow it right back.
  int64_t capacity = kMinIndexCapacity;
  while (capacity / 10 * 7 < 2 * size_) capacity *= 2;
  if (capacity >= capacity_) return;
  try {
    Rehash(capacity);
  } catch (const std::bad_alloc&) {
    // Keeping the larger array is correct, only less frugal.
  }
}

void KeyIndex::Allocate(int64_t capacity) {
  auto entries = std::make_unique_for_overwrite<Entry[]>(capacity);
  for (int64_t i = 0; i < capacity; ++i) entries[i].slot = -1;
  entries_ = std::move(entries);
  capacity_ = capacity;
  mask_ = static_cast<uint64_t>(capacity) - 1;
  shift_ = 64 - std::countr_zero(static_cast<uint64_t>(capacity));
  // Linear probing stays short up to a load of about 0.7.
  grow_at_ = capacity / 10 * 7;
}

void KeyIndex::Rehash(int64_t capacity) {
  std::unique_ptr<Entry[]> old = std::move(entries_);
  const int64_t old_capacity = capacity_;
  try {
    Allocate(capacity);
  } catch (...) {
    entries_ = std::move(old);  // unchanged: capacity_ etc. were not yet set
    throw;
  }
  for (int64_t i = 0; i < old_capacity; ++i) {
    if (old[i].slot < 0) continue;
    uint64_t b = Bucket(Mix64(old[i].key));
    while (entries_[b].slot >= 0) b = (b + 1) & mask_;
    entries_[b] = old[i];
  }
}

RowArena::RowArena(int64_t row_floats, int64_t chunk_bytes) : row_floats_(row_floats) {
  const int64_t rows = std::max<int64_t>(1, chunk_bytes / (row_floats * 4));
  chunk_shift_ = 63 - std::countl_zero(static_cast<uint64_t>(rows));  // floor(log2)
  chunk_mask_ = (int64_t{1} << chunk_shift_) - 1;
}

void RowArena::RemoveLast() {
  DCHECK_GT(size_, 0);
  --size_;
  ++removals_;
  const int64_t used_chunks = (size_ + chunk_mask_) >> chunk_shift_;
  while (static_cast<int64_t>(chunks_.size()) > used_chunks + 1) chunks_.pop_back();
}

}  // namespace ember::embedding
