#include "core/allocator.h"

#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

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

}  // namespace

Allocator* CpuAllocator() {
  static AlignedHostAllocator* allocator = new AlignedHostAllocator();
  return allocator;
}

Result<Allocator*> AllocatorFor(const Device& device) {
  if (device.is_cpu()) return CpuAllocator();
  return CudaAllocator(device.index);
}

void TuneProcessAllocator() {
#if defined(__GLIBC__)
  constexpr int kMmapThresholdBytes = 64 << 10;
  constexpr int kMaxArenas = 2;
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr) {
    mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes);
  }
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, kMaxArenas);
#endif
}

}  // namespace ember
