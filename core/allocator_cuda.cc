// Pinned host and device allocators through the CUDA runtime.
#include <cuda_runtime.h>
#include <glog/logging.h>

#include <memory>
#include <mutex>
#include <vector>

#include "core/allocator.h"

namespace ember {
namespace {

class PinnedAllocator final : public Allocator {
 public:
  Result<void*> Allocate(size_t bytes) override {
    void* ptr = nullptr;
    const cudaError_t error = cudaHostAlloc(&ptr, bytes == 0 ? 1 : bytes, cudaHostAllocPortable);
    if (error != cudaSuccess) {
      cudaGetLastError();
      return Status::ResourceExhausted("pinned host allocation of ", bytes,
                                       " bytes failed: ", cudaGetErrorString(error));
    }
    return ptr;
  }
  void Deallocate(void* ptr) override {
    if (ptr != nullptr) cudaFreeHost(ptr);
  }
  Device device() const override { return Device::Cpu(); }
  const char* name() const override { return "cuda_pinned"; }
};

class DeviceAllocator final : public Allocator {
 public:
  explicit DeviceAllocator(int index) : index_(index) {}
  Result<void*> Allocate(size_t bytes) override {
    cudaError_t error = cudaSetDevice(index_);
    void* ptr = nullptr;
    if (error == cudaSuccess) error = cudaMalloc(&ptr, bytes == 0 ? 1 : bytes);
    if (error != cudaSuccess) {
      cudaGetLastError();
      return Status::ResourceExhausted("cuda:", index_, " allocation of ", bytes,
                                       " bytes failed: ", cudaGetErrorString(error));
    }
    return ptr;
  }
  void Deallocate(void* ptr) override {
    if (ptr == nullptr) return;
    cudaError_t error = cudaSetDevice(index_);
    if (error == cudaSuccess) error = cudaFree(ptr);
    if (error != cudaSuccess) {
      cudaGetLastError();  // Not to be reported by an unrelated later launch.
      LOG_EVERY_N(WARNING, 100) << "cuda:" << index_
                                << ": cudaFree failed: " << cudaGetErrorString(error);
    }
  }
  Device device() const override { return Device::Cuda(index_); }
  const char* name() const override { return "cuda_device"; }

 private:
  int index_;
};

}  // namespace

Allocator* PinnedHostAllocator() {
  // Without a device, cudaHostAlloc fails; plain aligned memory behaves the
  // same for CPU-only runs.
  static Allocator* allocator =
      CudaDeviceAvailable()
          ? static_cast<Allocator*>(new CachingHostAllocator(HostCacheBytes(), new PinnedAllocator()))
          : CpuAllocator();
  return allocator;
}

Result<Allocator*> CudaAllocator(int index) {
  const int count = CudaDeviceCount();
  if (index < 0 || index >= count) {
    return Status::FailedPrecondition("cuda:", index, " requested but ", count,
                                      " CUDA device(s) are present");
  }
  static std::mutex mu;
  static std::vector<std::unique_ptr<DeviceAllocator>> allocators;
  std::lock_guard<std::mutex> lock(mu);
  if (allocators.empty()) {
    for (int i = 0; i < count; ++i) allocators.push_back(std::make_unique<DeviceAllocator>(i));
  }
  return static_cast<Allocator*>(allocators[index].get());
}

}  // namespace ember
