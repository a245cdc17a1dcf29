// Allocators for a build without CUDA.
#include "core/allocator.h"

namespace ember {

Allocator* PinnedHostAllocator() { return CpuAllocator(); }

Result<Allocator*> CudaAllocator(int index) {
  return Status::FailedPrecondition("cuda:", index,
                                    " requested but Ember was built without CUDA");
}

}  // namespace ember
