#include "core/allocator.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <sys/mman.h>

namespace ember {
namespace {

class AlignedHostAllocator final : public Allocator {
 public:
  Result<void*> Allocate(size_t bytes) override {
    // aligned_alloc needs a size that is a multiple of the alignment.
    const size_t rounded =
        (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
    void* ptr = std::aligned_alloc(kHostAlignment, rounded == 0 ? kHostAlignment : rounded);
    if (ptr == nullptr) {
      return Status::ResourceExhausted("host allocation of ", bytes, " bytes failed");
    }
    return ptr;
  }
  void Deallocate(void* ptr) override { std::free(ptr); }
  Device device() const override { return Device::Cpu(); }
  const char* name() const override { return "cpu_aligned"; }
};

// The size class of `bytes` (>= 64 KiB): rounded up to a multiple of 1/8 of
// the largest power of two not above it.
size_t SizeClass(size_t bytes) {
  size_t power = 1;
  while (power <= bytes / 2) power *= 2;
  const size_t step = power / 8;
  return (bytes + step - 1) / step * step;
}

}  // namespace

struct CachingHostAllocator::Impl {
  Impl(size_t max_cached, Allocator* upstream)
      : max_cached(max_cached),
        host(upstream != nullptr ? *upstream : aligned),
        name(upstream != nullptr ? std::string("caching_") + upstream->name() : "cpu_caching") {}
  const size_t max_cached;
  AlignedHostAllocator aligned;
  Allocator& host;
  const std::string name;
  mutable std::mutex mu;
  // Size class of every block handed out or cached (blocks of at least
  // kMinCachedBytes only).
  std::unordered_map<void*, size_t> class_of;
  // Freed blocks by size class.
  std::unordered_map<size_t, std::vector<void*>> free_blocks;
  size_t cached = 0;
};

CachingHostAllocator::CachingHostAllocator(size_t max_cached_bytes, Allocator* upstream)
    : impl_(std::make_unique<Impl>(max_cached_bytes, upstream)) {}

const char* CachingHostAllocator::name() const {
  return impl_->name.c_str();
}

CachingHostAllocator::~CachingHostAllocator() {
  for (auto& [size, blocks] : impl_->free_blocks) {
    for (void* block : blocks) impl_->host.Deallocate(block);
  }
}

Result<void*> CachingHostAllocator::Allocate(size_t bytes) {
  if (bytes < kMinCachedBytes || impl_->max_cached == 0) return impl_->host.Allocate(bytes);
  const size_t size = SizeClass(bytes);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto it = impl_->free_blocks.find(size);
    if (it != impl_->free_blocks.end() && !it->second.empty()) {
      void* block = it->second.back();
      it->second.pop_back();
      impl_->cached -= size;
      return block;
    }
  }
  EMBER_ASSIGN_OR_RETURN(void* block, impl_->host.Allocate(size));
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->class_of[block] = size;
  return block;
}

void CachingHostAllocator::Deallocate(void* ptr) {
  if (ptr == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto it = impl_->class_of.find(ptr);
    if (it != impl_->class_of.end()) {
      const size_t size = it->second;
      if (impl_->cached + size <= impl_->max_cached) {
        impl_->free_blocks[size].push_back(ptr);
        impl_->cached += size;
        return;
      }
      impl_->class_of.erase(it);
    }
  }
  impl_->host.Deallocate(ptr);
}

size_t CachingHostAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->cached;
}

size_t HostCacheBytes() {
  size_t megabytes = 256;
  if (const char* env = std::getenv("EMBER_HOST_CACHE_MB")) {
    megabytes = static_cast<size_t>(std::strtoull(env, nullptr, 10));
  }
  return megabytes << 20;
}

Allocator* CpuAllocator() {
  static CachingHostAllocator* allocator = new CachingHostAllocator(HostCacheBytes());
  return allocator;
}

Result<Allocator*> AllocatorFor(const Device& device) {
  if (device.is_cpu()) return CpuAllocator();
  return CudaAllocator(device.index);
}

void TuneProcessAllocator() {
#if defined(__GLIBC__)
  constexpr int kMmapThresholdBytes = 4 << 20;
  constexpr int kMaxArenas = 1;
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr) {
    mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes);
  }
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, kMaxArenas);
#endif
}

void TuneProcessAllocatorWithoutMemoryBudget() {
#if defined(__GLIBC__)
  constexpr int kMmapThresholdBytes = 1 << 20;
  constexpr int kTopPadBytes = 16 << 20;
  constexpr int kMaxArenas = 2;
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr) {
    mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes);
  }
  if (std::getenv("MALLOC_TOP_PAD_") == nullptr) mallopt(M_TOP_PAD, kTopPadBytes);
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, kMaxArenas);
#endif
}

void AdviseHugePages(const void* data, size_t bytes) {
#ifndef MADV_COLLAPSE
  constexpr int MADV_COLLAPSE = 25;
#endif
  constexpr uintptr_t kHugePage = kHugePageBytes;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kHugePage - 1);
  if (data == nullptr || end <= begin) return;
  void* start = reinterpret_cast<void*>(begin);
  if (madvise(start, end - begin, MADV_HUGEPAGE) != 0) return;
  madvise(start, end - begin, MADV_COLLAPSE);
}

namespace {

// The first integer in the file at `path`, or -1 if it cannot be read (or
// holds "max", cgroup v2's "no limit").
int64_t ReadInteger(const char* path) {
  std::ifstream in(path);
  int64_t value = -1;
  if (!(in >> value)) return -1;
  return value;
}

}  // namespace

int64_t AvailableMemoryBytes() {
  int64_t available = -1;
  std::ifstream meminfo("/proc/meminfo");
  std::string name;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> name >> kib) {
    std::getline(meminfo, unit);
    if (name == "MemAvailable:") {
      available = kib * 1024;
      break;
    }
  }
  const int64_t limit = ReadInteger("/sys/fs/cgroup/memory.max");
  const int64_t used = ReadInteger("/sys/fs/cgroup/memory.current");
  if (limit >= 0 && used >= 0) {
    const int64_t left = std::max<int64_t>(0, limit - used);
    available = available < 0 ? left : std::min(available, left);
  }
  return available;
}

}  // namespace ember
