#pragma once

#include <cstddef>
#include <memory>

#include "core/allocator.h"
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

  // Device memory ordered on this stream (cudaMallocAsync/cudaFreeAsync from
  // the device's pool, which keeps up to 256 MiB between uses; 256-byte
  // aligned blocks): a block may be freed while work queued on this stream
  // still uses it, since its reuse waits for that work. Not for use on
  // another stream without synchronising; must not outlive the stream.
  Allocator* allocator() const { return allocator_.get(); }

 private:
  CudaStream(int device, void* stream, std::unique_ptr<Allocator> allocator)
      : device_(device), stream_(stream), allocator_(std::move(allocator)) {}
  int device_;
  void* stream_;
  std::unique_ptr<Allocator> allocator_;
};

}  // namespace ember
