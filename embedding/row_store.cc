#include "embedding/internal/row_store.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <new>
#include <utility>

#include <glog/logging.h>

#include "core/allocator.h"
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

void KeyIndex::Reserve(int64_t keys) {
  int64_t capacity = capacity_;
  while (capacity / 10 * 7 < keys) capacity *= 2;
  if (capacity > capacity_) Rehash(capacity);
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

namespace {

// log2 of the rows per chunk: the most rows, a power of two, that fit in
// `chunk_bytes` (at least one).
int ChunkShift(int64_t row_floats, int64_t chunk_bytes) {
  const int64_t rows = std::max<int64_t>(1, chunk_bytes / (row_floats * 4));
  return 63 - std::countl_zero(static_cast<uint64_t>(rows));  // floor(log2)
}

}  // namespace

ChunkPool::ChunkPool(int64_t chunk_bytes) : chunk_bytes_(chunk_bytes) {
  CHECK(chunk_bytes > 0 && chunk_bytes % 4 == 0)
      << "ChunkPool: chunks of " << chunk_bytes << " bytes";
}

ChunkPool::~ChunkPool() {
  for (const Region& region : regions_) std::free(region.begin);
}

bool ChunkPool::Reserve(int64_t chunks) {
  if (chunks <= 0) return true;
  if (chunks > static_cast<int64_t>(SIZE_MAX / 2) / chunk_bytes_) return false;
  // Whole huge pages, aligned to one, so that the region's pages can be.
  const size_t bytes = (static_cast<size_t>(chunks * chunk_bytes_) + kHugePageBytes - 1) /
                       kHugePageBytes * kHugePageBytes;
  char* begin = static_cast<char*>(std::aligned_alloc(kHugePageBytes, bytes));
  if (begin == nullptr) return false;
  AdviseHugePages(begin, bytes);
  // One write per 4 KiB page: on a huge page the first one faults in all 2 MiB.
  for (size_t offset = 0; offset < bytes; offset += 4096) begin[offset] = 0;
  MutexLock lock(mu_);
  try {
    regions_.reserve(regions_.size() + 1);
    // Room for every chunk: Give never allocates.
    free_.reserve(static_cast<size_t>(total_chunks_ + chunks));
  } catch (const std::bad_alloc&) {
    std::free(begin);
    return false;
  }
  regions_.push_back(Region{begin, begin + bytes});
  total_chunks_ += chunks;
  // Handed out from the region's start (the back of free_ goes first).
  for (int64_t c = chunks; c-- > 0;) {
    free_.push_back(reinterpret_cast<float*>(begin + c * chunk_bytes_));
  }
  return true;
}

float* ChunkPool::Take() {
  MutexLock lock(mu_);
  if (free_.empty()) return nullptr;
  float* chunk = free_.back();
  free_.pop_back();
  return chunk;
}

bool ChunkPool::Owns(const float* chunk) const {
  const char* p = reinterpret_cast<const char*>(chunk);
  MutexLock lock(mu_);
  for (const Region& region : regions_) {
    if (p >= region.begin && p < region.end) return true;
  }
  return false;
}

void ChunkPool::Give(float* chunk) {
  MutexLock lock(mu_);
  free_.push_back(chunk);  // Room reserved with its region.
}

int64_t ChunkPool::idle_bytes() const {
  MutexLock lock(mu_);
  return static_cast<int64_t>(free_.size()) * chunk_bytes_;
}

RowArena::RowArena(int64_t row_floats, int64_t chunk_bytes, ChunkPool* pool)
    : pool_(pool),
      row_floats_(static_cast<int32_t>(row_floats)),
      chunk_shift_(ChunkShift(row_floats, chunk_bytes)) {
  chunk_mask_ = (int64_t{1} << chunk_shift_) - 1;
  CHECK(pool_ == nullptr || pool_->chunk_bytes() == ChunkBytesFor(row_floats, chunk_bytes))
      << "RowArena: the pool's chunks are " << pool_->chunk_bytes() << " bytes, the arena's "
      << ChunkBytesFor(row_floats, chunk_bytes);
}

RowArena::~RowArena() {
  for (float* chunk : chunks_) FreeChunk(chunk);
}

int64_t RowArena::ChunkBytesFor(int64_t row_floats, int64_t chunk_bytes) {
  return (int64_t{1} << ChunkShift(row_floats, chunk_bytes)) * row_floats * 4;
}

void RowArena::AddChunk() {
  // Room first, growing as push_back would, so that push_back cannot throw.
  if (chunks_.size() == chunks_.capacity())
    chunks_.reserve(std::max<size_t>(1, 2 * chunks_.size()));
  float* chunk = pool_ != nullptr ? pool_->Take() : nullptr;
  chunks_.push_back(chunk != nullptr ? chunk : new float[ChunkFloats()]);
}

void RowArena::FreeChunk(float* chunk) {
  if (pool_ != nullptr && pool_->Owns(chunk)) {
    pool_->Give(chunk);
  } else {
    delete[] chunk;
  }
}

void RowArena::RemoveLast() {
  DCHECK_GT(size_, 0);
  --size_;
  ++removals_;
  const int64_t used_chunks = (size_ + chunk_mask_) >> chunk_shift_;
  while (static_cast<int64_t>(chunks_.size()) > used_chunks + 1) {
    FreeChunk(chunks_.back());
    chunks_.pop_back();
  }
}

}  // namespace ember::embedding
