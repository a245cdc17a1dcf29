#include "embedding/unique_keys.h"

#include <glog/logging.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <new>

#include "core/allocator.h"
#include "core/random.h"

namespace ember::embedding {
namespace {

// An open-addressing slot: empty unless `generation` is the current call's,
// so a call starts with an empty table without clearing it. The key is kept
// in the slot, so a probe reads one cache line, not the slot and the key's
// place in `unique` too.
struct Slot {
  Key key;
  uint32_t generation;
  uint32_t position;  // in `unique`
};

// A table kept by the calling thread between calls: a batch's table (2 MiB
// at DLRM's 53K keys) allocated and zeroed per call cost page faults and a
// memset larger than the deduplication itself.
class SlotTable {
 public:
  // Slots [0, capacity) for a new call, all empty.
  Slot* Prepare(size_t capacity) {
    if (capacity > capacity_) {
      slots_.reset();
      // Whole 2 MiB pages when the table fills one or more (DLRM's does):
      // its probes go anywhere in it, each 4 KiB page a TLB miss (measured
      // with cold caches at 53K keys: 1.27 -> 1.08 ms a call).
      const size_t bytes = capacity * sizeof(Slot);
      const size_t align = bytes >= kHugePageBytes ? kHugePageBytes : alignof(Slot);
      void* memory = std::aligned_alloc(align, (bytes + align - 1) / align * align);
      if (memory == nullptr) throw std::bad_alloc();
      slots_.reset(static_cast<Slot*>(memory));
      if (align == kHugePageBytes) AdviseHugePages(memory, bytes);
      std::memset(memory, 0, bytes);  // generation 0: empty
      capacity_ = capacity;
      generation_ = 0;
    }
    if (++generation_ == 0) {  // wrapped: generation 0 must mean empty again
      for (size_t i = 0; i < capacity_; ++i) slots_.get()[i].generation = 0;
      generation_ = 1;
    }
    return slots_.get();
  }
  uint32_t generation() const { return generation_; }

 private:
  struct Free {
    void operator()(Slot* slots) const { std::free(slots); }
  };
  std::unique_ptr<Slot, Free> slots_;
  size_t capacity_ = 0;
  uint32_t generation_ = 0;
};

// The largest table a thread keeps between calls: 32 MiB, batches of up to
// 1M keys. A larger batch gets a table of its own, freed when it is done,
// rather than leaving hundreds of MiB with the thread.
constexpr size_t kMaxKeptSlots = size_t{1} << 21;

// Keys ahead whose slot is prefetched: enough to cover a memory access.
constexpr size_t kPrefetchDistance = 8;

}  // namespace

void UniqueKeys(const std::vector<Key>& keys, std::vector<Key>* unique,
                std::vector<int64_t>* index) {
  unique->clear();
  const size_t n = keys.size();
  index->resize(n);
  if (n == 0) return;
  // Positions are 32-bit: 4G keys would be 32 GiB of keys in one batch.
  CHECK_LE(n, size_t{std::numeric_limits<uint32_t>::max()}) << "UniqueKeys: batch too large";
  unique->reserve(n);
  size_t capacity = 16;
  while (capacity < n * 2) capacity <<= 1;
  const size_t mask = capacity - 1;
  thread_local SlotTable kept;
  SlotTable once;
  SlotTable& table = capacity <= kMaxKeptSlots ? kept : once;
  Slot* slots = table.Prepare(capacity);
  const uint32_t generation = table.generation();
  for (size_t i = 0; i < n; ++i) {
    if (i + kPrefetchDistance < n)
      __builtin_prefetch(&slots[Mix64(keys[i + kPrefetchDistance]) & mask]);
    const Key key = keys[i];
    size_t s = Mix64(key) & mask;
    while (true) {
      Slot& slot = slots[s];
      if (slot.generation != generation) {
        const uint32_t position = static_cast<uint32_t>(unique->size());
        slot = Slot{key, generation, position};
        unique->push_back(key);
        (*index)[i] = position;
        break;
      }
      if (slot.key == key) {
        (*index)[i] = slot.position;
        break;
      }
      s = (s + 1) & mask;
    }
  }
}

}  // namespace ember::embedding
