#pragma once

#include <cstddef>
#include <memory>

#include "core/device.h"
#include "core/status.h"

namespace ember {

// Alignment of every host allocation: one cache line, and enough for AVX-512.
inline constexpr size_t kHostAlignment = 64;

// Hands out raw memory on one device.
// Thread safety: all methods may be called concurrently.
class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns `bytes` of memory (a zero-byte request gets a valid pointer), or
  // ResourceExhausted when the device has no room.
  virtual Result<void*> Allocate(size_t bytes) = 0;
  // Frees memory from Allocate(); nullptr is ignored.
  virtual void Deallocate(void* ptr) = 0;
  virtual Device device() const = 0;
  virtual const char* name() const = 0;
};

// 64-byte aligned host memory. Never null; lives for the whole process.
Allocator* CpuAllocator();

// Page-locked host memory for fast, asynchronous host<->device copies. Without
// a CUDA device it is plain aligned host memory (so CPU-only runs work alike).
Allocator* PinnedHostAllocator();

// Device memory of CUDA device `index`. Returns FailedPrecondition when Ember
// was built without CUDA or the device does not exist.
Result<Allocator*> CudaAllocator(int index);

// The allocator for tensors on `device`.
Result<Allocator*> AllocatorFor(const Device& device);

// Sets glibc malloc up for a long training process whose heap must stay close
// to what it uses (the embedding memory budget is a promise about RSS). Call
// once at the start of main, before threads start; libraries never call it.
// * A fixed mmap threshold of 64 KiB. By default glibc raises the threshold
//   to the size of any mmap-ed block freed (up to 32 MiB); after the disk
//   tier frees its first memtable block, row chunks, hash indexes and
//   RocksDB blocks would all come from heap pages interleaved with each
//   other, which are rarely returned to the system.
// * At most 2 arenas. Each thread otherwise gets its own (up to 8 per core),
//   and memory freed in one (a RocksDB background thread's) cannot serve
//   another (an oneTBB worker's).
// Measured with tools/bench/embedding_rss (64 MiB budget, table 4x larger):
// peak RSS 145 MiB with glibc's defaults, 112 MiB with these.
// A setting the user gave in the environment (MALLOC_MMAP_THRESHOLD_,
// MALLOC_ARENA_MAX) is left as it is. No-op on other C libraries.
void TuneProcessAllocator();

}  // namespace ember
