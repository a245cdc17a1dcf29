#include "core/allocator.h"

#include <cstdlib>

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

}  // namespace ember
