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

// 64-byte aligned host memory that keeps freed blocks of at least
// kMinCachedBytes for reuse: a training step allocates the same activation
// and gradient tensors every step, and without a cache each of those (above
// glibc's mmap threshold, see TuneProcessAllocator) is a fresh mmap whose
// pages fault in again on first touch (measured: 17% of a DLRM step's CPU in
// the kernel). Sizes are rounded up to classes 1/8 of a power of two apart
// (at most 12.5% more memory). At most `max_cached_bytes` are kept; beyond
// it, freed blocks go back to the system. The blocks come from `upstream`
// (null: aligned host memory), which must outlive this allocator: over
// page-locked memory (PinnedHostAllocator) the cache also spares each step
// cudaHostAlloc's page locking and cudaFreeHost's device synchronisation.
// Thread safety: all methods may be called concurrently.
class CachingHostAllocator final : public Allocator {
 public:
  static constexpr size_t kMinCachedBytes = size_t{64} << 10;
  explicit CachingHostAllocator(size_t max_cached_bytes, Allocator* upstream = nullptr);
  ~CachingHostAllocator() override;
  Result<void*> Allocate(size_t bytes) override;
  void Deallocate(void* ptr) override;
  Device device() const override { return Device::Cpu(); }
  const char* name() const override;
  // Bytes of freed blocks held for reuse.
  size_t cached_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The CachingHostAllocator of the process, with up to 256 MiB cached
// (EMBER_HOST_CACHE_MB in the environment sets another limit; 0 turns the
// cache off). Never null; lives for the whole process.
Allocator* CpuAllocator();

// Page-locked host memory for fast, asynchronous host<->device copies, with
// freed blocks cached as CpuAllocator's are (the same limit). Without a CUDA
// device it is CpuAllocator() (so CPU-only runs work alike).
Allocator* PinnedHostAllocator();

// The limit of CpuAllocator's cache (and PinnedHostAllocator's): 256 MiB, or
// EMBER_HOST_CACHE_MB from the environment.
size_t HostCacheBytes();

// Device memory of CUDA device `index`. Returns FailedPrecondition when Ember
// was built without CUDA or the device does not exist.
Result<Allocator*> CudaAllocator(int index);

// The allocator for tensors on `device`.
Result<Allocator*> AllocatorFor(const Device& device);

// Sets glibc malloc up for a long training process whose heap must stay close
// to what it uses (the embedding memory budget is a promise about RSS). Call
// once at the start of main, before threads start; libraries never call it.
// * A fixed mmap threshold of 4 MiB. By default glibc raises the threshold
//   to the size of any mmap-ed block freed (up to 32 MiB); after the disk
//   tier frees its first memtable, row chunks, hash indexes and RocksDB
//   blocks would all come from heap pages interleaved with each other, which
//   are rarely returned to the system. Fixed, the threshold stops that; at
//   4 MiB (not lower) the disk tier's churn of blocks between 64 KiB and
//   4 MiB (memtable arena blocks of write_buffer/8, SST builder and file
//   buffers, compaction read-ahead) reuses heap pages instead of mapping,
//   faulting in and unmapping them again: issue 38 measured 64 KiB against
//   4 MiB on DLRM at a 10% budget (600k generated examples, 2 threads): page
//   faults of 120 steps 725k -> 441k, kernel time 22 -> 14 s of a run,
//   +17-35% samples/s in 2 alternating pairs (the memtable's 2 MiB arena
//   blocks alone, made small: 725k -> 565k). The cost: tools/bench/
//   embedding_rss's peak RSS +3.5-4.4 MiB at 4x and 16x the budget, a fixed
//   amount (freed blocks held in the heap).
// * One arena. Each thread otherwise gets its own (up to 8 per core), and
//   memory freed in one (a RocksDB background thread's) cannot serve another
//   (an oneTBB worker's). Two arenas against one (issue 38, embedding_rss,
//   64 MiB budget, one session): peak RSS 5.8 against 0.1-1.0 MiB over its
//   line at 4x the budget, 8.8 against 3.5-3.8 at 16x; DLRM at a 10% budget
//   trained at the same speed with either (16.3k/15.8k and 16.0k/16.0k
//   samples/s, alternating).
// Measured with tools/bench/embedding_rss (64 MiB budget, table 4x larger)
// when the threshold was 64 KiB: peak RSS 145 MiB with glibc's defaults,
// 112 MiB with these.
// A setting the user gave in the environment (MALLOC_MMAP_THRESHOLD_,
// MALLOC_ARENA_MAX) is left as it is. No-op on other C libraries.
void TuneProcessAllocator();

// For a process with no memory budget to keep (no disk tier under the
// embedding table): sets the mmap threshold to 1 MiB, and allows 2 arenas
// (fewer threads then wait on one arena's lock; no RSS line to keep).
// oneDNN's SGEMM allocates and frees a packing buffer on every call, per
// thread (oneDNN 2.6, AVX-512: 72 KiB each on 2 threads, 690 KiB on one).
// Above the threshold each is an mmap whose pages fault in again and whose
// munmap stops the other cores to flush their TLBs: DLRM at batch 2048 on 2
// threads makes 26 a step. Measured: +2.5% samples/s (5 alternating pairs),
// peak RSS +0.5%. It also keeps up to 16 MiB free at the top of each heap
// (M_TOP_PAD) where glibc returns all but 128 KiB: below the threshold the
// same buffers otherwise grow the heap, fault in and are trimmed away on
// every call (with row shards each thread's SGEMMs run single-threaded and
// take the 690 KiB ones). Measured on DLRM at 2 threads: +1.3% samples/s
// (5 alternating pairs of builds; +2.75% in 4 pairs with and without
// MALLOC_TOP_PAD_=16777216), page faults of the run 245k -> 168k, peak RSS
// +0.3%. Each setting is left as it is when the user set its
// MALLOC_*_ variable. May be called while other threads run. No-op on other
// C libraries.
void TuneProcessAllocatorWithoutMemoryBudget();

// The size of an x86-64 transparent huge page.
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// Asks the kernel to back the whole 2 MiB pages inside [data, data + bytes)
// with transparent huge pages: those already touched now (MADV_COLLAPSE,
// Linux 6.1), later ones as they fault in (MADV_HUGEPAGE). For large,
// long-lived arrays read at random, where nearly every read of 4 KiB pages
// misses the TLB, and a miss costs two page walks in a virtual machine.
// Measured: gathering a shuffled batch of 2048 rows from a 200k-row dataset
// (cold caches) 2.0 -> 0.85 ms. Contents are unchanged. Best effort: where
// the kernel refuses, or transparent huge pages are off, nothing changes.
void AdviseHugePages(const void* data, size_t bytes);

// Bytes this process may still fault in before the kernel reclaims hard or
// kills it: the machine's MemAvailable (/proc/meminfo), lowered to what the
// cgroup (v2) at /sys/fs/cgroup (a container's own) still allows,
// memory.max - memory.current, when it has a limit. -1 when neither can be read (not Linux). For
// refusing to fault in a large reservation that would get the process killed, rather than as an
// exact figure: it changes as other processes run.
int64_t AvailableMemoryBytes();

}  // namespace ember
