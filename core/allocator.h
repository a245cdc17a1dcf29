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

}  // namespace ember
