#include <cuda_runtime.h>

#include "core/cuda_stream.h"
#include "core/device.h"

namespace ember {
namespace {

Status CudaStatus(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::OK();
  cudaGetLastError();
  return Status::Internal(what, ": ", cudaGetErrorString(error));
}

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
  return std::unique_ptr<CudaStream>(new CudaStream(device, stream));
}

CudaStream::~CudaStream() {
  cudaSetDevice(device_);
  cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
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
