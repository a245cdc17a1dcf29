#pragma once

#include <cstddef>
#include <memory>

#include "core/status.h"

namespace ember {

// An ordered queue of work on one CUDA device (a cudaStream_t), owned.
// Device work takes its stream explicitly; nothing looks up a "current" one.
// Thread safety: a stream may be used from one thread at a time.
class CudaStream {
 public:
  // Fails with FailedPrecondition without CUDA or without that device.
  static Result<std::unique_ptr<CudaStream>> Create(int device);
  ~CudaStream();
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  int device() const { return device_; }
  // The cudaStream_t, for CUDA code in .cu / *_cuda.cc files.
  void* native() const { return stream_; }
  // Waits for all work queued so far; returns the first asynchronous error.
  Status Synchronize();

  // Queues a copy of `bytes` between host and this device. The host side
  // should be pinned (PinnedHostAllocator) for the copy to be asynchronous.
  Status CopyToDevice(const void* host_src, void* device_dst, size_t bytes);
  Status CopyToHost(const void* device_src, void* host_dst, size_t bytes);
  // Queues a copy between two buffers of this device.
  Status CopyOnDevice(const void* device_src, void* device_dst, size_t bytes);
  // Queues setting `bytes` of device memory to zero.
  Status SetZero(void* device_dst, size_t bytes);

 private:
  CudaStream(int device, void* stream) : device_(device), stream_(stream) {}
  int device_;
  void* stream_;
};

}  // namespace ember
