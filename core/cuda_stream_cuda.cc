#include <cuda_runtime.h>
#include <glog/logging.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>

#include "core/cuda_stream.h"
#include "core/device.h"

namespace ember {
namespace {

Status CudaStatus(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::OK();
  cudaGetLastError();
  return Status::Internal(what, ": ", cudaGetErrorString(error));
}

// Freed blocks stay in the device's default pool up to this many bytes
// instead of going back to the driver at every synchronisation, so that
// per-call temporaries cost no driver call in steady state.
constexpr uint64_t kPoolReleaseThresholdBytes = uint64_t{256} << 20;

void KeepPoolWarm(int device) {
  static std::mutex mu;
  static std::set<int> done;
  std::lock_guard<std::mutex> lock(mu);
  if (!done.insert(device).second) return;
  cudaMemPool_t pool = nullptr;
  if (cudaDeviceGetDefaultMemPool(&pool, device) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  uint64_t threshold = kPoolReleaseThresholdBytes;
  if (cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold) != cudaSuccess) {
    cudaGetLastError();
  }
}

class StreamOrderedAllocator final : public Allocator {
 public:
  StreamOrderedAllocator(int device, cudaStream_t stream) : device_(device), stream_(stream) {}
  Result<void*> Allocate(size_t bytes) override {
    KeepPoolWarm(device_);
    // 256-byte granules keep every block aligned for vector loads and cuBLASLt.
    const size_t rounded = ((bytes == 0 ? 1 : bytes) + 255) / 256 * 256;
    void* ptr = nullptr;
    cudaError_t error = cudaSetDevice(device_);
    if (error == cudaSuccess) error = cudaMallocAsync(&ptr, rounded, stream_);
    if (error != cudaSuccess) {
      cudaGetLastError();
      return Status::ResourceExhausted(
          "cuda:", device_, ": ", bytes,
          " bytes of stream-ordered memory: ", cudaGetErrorString(error));
    }
    return ptr;
  }
  void Deallocate(void* ptr) override {
    if (ptr == nullptr) return;
    if (const cudaError_t error = cudaFreeAsync(ptr, stream_); error != cudaSuccess) {
      // Cleared, so that the next kernel launch does not report it as its own.
      cudaGetLastError();
      LOG_EVERY_N(WARNING, 100) << "cuda:" << device_
                                << ": cudaFreeAsync failed: " << cudaGetErrorString(error);
    }
  }
  Device device() const override { return Device::Cuda(device_); }
  const char* name() const override { return "cuda_stream_ordered"; }

 private:
  int device_;
  cudaStream_t stream_;
};

}  // namespace

Result<std::unique_ptr<CudaStream>> CudaStream::Create(int device) {
  if (device < 0 || device >= CudaDeviceCount()) {
    return Status::FailedPrecondition("cuda:", device, " requested but ", CudaDeviceCount(),
                                      " CUDA device(s) are present");
  }
  EMBER_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device), "cudaSetDevice"));
  cudaStream_t stream = nullptr;
  EMBER_RETURN_IF_ERROR(
      CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"));
  return std::unique_ptr<CudaStream>(
      new CudaStream(device, stream, std::make_unique<StreamOrderedAllocator>(device, stream)));
}

CudaStream::~CudaStream() {
  cudaError_t error = cudaSetDevice(device_);
  if (error == cudaSuccess) error = cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  if (error != cudaSuccess) {
    cudaGetLastError();  // Not to be reported by an unrelated later launch.
    LOG(WARNING) << "cuda:" << device_ << ": destroying a stream: " << cudaGetErrorString(error);
  }
}

Status CudaStream::Synchronize() {
  return CudaStatus(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)),
                    "cudaStreamSynchronize");
}

Status CudaStream::CopyToDevice(const void* host_src, void* device_dst, size_t bytes) {
  return CudaStatus(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice,
                                    static_cast<cudaStream_t>(stream_)),
                    "host-to-device copy");
}

Status CudaStream::CopyToHost(const void* device_src, void* host_dst, size_t bytes) {
  return CudaStatus(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost,
                                    static_cast<cudaStream_t>(stream_)),
                    "device-to-host copy");
}

Status CudaStream::CopyOnDevice(const void* device_src, void* device_dst, size_t bytes) {
  return CudaStatus(cudaMemcpyAsync(device_dst, device_src, bytes, cudaMemcpyDeviceToDevice,
                                    static_cast<cudaStream_t>(stream_)),
                    "device-to-device copy");
}

Status CudaStream::SetZero(void* device_dst, size_t bytes) {
  // A memset is queued on the current device, which must be the stream's.
  EMBER_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));
  return CudaStatus(cudaMemsetAsync(device_dst, 0, bytes, static_cast<cudaStream_t>(stream_)),
                    "cudaMemsetAsync");
}

}  // namespace ember
