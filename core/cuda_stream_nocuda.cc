// CUDA streams in a build without CUDA: every call says so.
#include "core/cuda_stream.h"

namespace ember {

Result<std::unique_ptr<CudaStream>> CudaStream::Create(int device) {
  return Status::FailedPrecondition("cuda:", device,
                                    " requested but Ember was built without CUDA");
}

CudaStream::~CudaStream() = default;

Status CudaStream::Synchronize() { return Status::FailedPrecondition("built without CUDA"); }

Status CudaStream::CopyToDevice(const void*, void*, size_t) {
  return Status::FailedPrecondition("built without CUDA");
}

Status CudaStream::CopyToHost(const void*, void*, size_t) {
  return Status::FailedPrecondition("built without CUDA");
}

Status CudaStream::CopyOnDevice(const void*, void*, size_t) {
  return Status::FailedPrecondition("built without CUDA");
}

Status CudaStream::SetZero(void*, size_t) {
  return Status::FailedPrecondition("built without CUDA");
}

}  // namespace ember
