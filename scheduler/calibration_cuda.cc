// MeasurePinnedCopyGbps through the CUDA runtime.
#include <cuda_runtime.h>

#include "core/device.h"
#include "scheduler/calibration.h"

namespace ember::scheduler {
namespace {

Status CudaError(cudaError_t error, const char* what) {
  cudaGetLastError();
  return Status::FailedPrecondition(what, ": ", cudaGetErrorString(error));
}

}  // namespace

Result<double> MeasurePinnedCopyGbps(int device) {
  if (device >= CudaDeviceCount()) {
    return Status::FailedPrecondition("no CUDA device ", device, " to time copies to");
  }
  constexpr size_t kBytes = size_t{64} << 20;
  constexpr int kCopies = 5;
  void* host = nullptr;
  void* dev = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaError_t error = cudaSetDevice(device);
  if (error == cudaSuccess) error = cudaHostAlloc(&host, kBytes, cudaHostAllocPortable);
  if (error == cudaSuccess) error = cudaMalloc(&dev, kBytes);
  if (error == cudaSuccess) error = cudaEventCreate(&start);
  if (error == cudaSuccess) error = cudaEventCreate(&stop);
  float ms = 0.0f;
  if (error == cudaSuccess)
    error = cudaMemcpy(dev, host, kBytes, cudaMemcpyHostToDevice);  // warm-up
  if (error == cudaSuccess) error = cudaEventRecord(start);
  for (int i = 0; i < kCopies && error == cudaSuccess; ++i) {
    error = cudaMemcpyAsync(dev, host, kBytes, cudaMemcpyHostToDevice);
  }
  if (error == cudaSuccess) error = cudaEventRecord(stop);
  if (error == cudaSuccess) error = cudaEventSynchronize(stop);
  if (error == cudaSuccess) error = cudaEventElapsedTime(&ms, start, stop);
  const cudaError_t failed = error;
  if (start) cudaEventDestroy(start);
  if (stop) cudaEventDestroy(stop);
  if (dev) cudaFree(dev);
  if (host) cudaFreeHost(host);
  if (failed != cudaSuccess) return CudaError(failed, "timing pinned host-to-device copies");
  return kCopies * static_cast<double>(kBytes) / (ms * 1e-3) / 1e9;
}

}  // namespace ember::scheduler
