#include "core/nccl_communicator_kernels.h"

#include <cuda_runtime.h>

#include <algorithm>

namespace ember::nccl_kernels {
namespace {

// Explicitly rounded additions: the compiler may not fuse or reorder them.
__device__ float Add(float a, float b) { return __fadd_rn(a, b); }
__device__ double Add(double a, double b) { return __dadd_rn(a, b); }
// Integers in unsigned arithmetic, which wraps.
__device__ int32_t Add(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}
__device__ int64_t Add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
__device__ uint64_t Add(uint64_t a, uint64_t b) { return a + b; }

template <typename T>
__global__ void SumInRankOrderKernel(const T* gathered, int ranks, int64_t count, T* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    T sum = gathered[i];
    for (int r = 1; r < ranks; ++r) sum = Add(sum, gathered[r * count + i]);
    out[i] = sum;
  }
}

template <typename T>
Status Launch(const void* gathered, int ranks, int64_t count, void* out, cudaStream_t stream) {
  constexpr int kThreads = 256;
  // Enough blocks to fill a large GPU; the grid-stride loop covers the rest.
  const int64_t blocks = std::min<int64_t>((count + kThreads - 1) / kThreads, 8192);
  SumInRankOrderKernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<const T*>(gathered), ranks, count, static_cast<T*>(out));
  const cudaError_t error = cudaGetLastError();
  if (error == cudaSuccess) return Status::OK();
  return Status::Internal("rank-ordered sum kernel: ", cudaGetErrorString(error));
}

}  // namespace

Status LaunchSumInRankOrder(const void* gathered, int ranks, int64_t count, CommDType dtype,
                            void* out, void* stream) {
  if (count == 0) return Status::OK();
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case CommDType::kF32: return Launch<float>(gathered, ranks, count, out, s);
    case CommDType::kF64: return Launch<double>(gathered, ranks, count, out, s);
    case CommDType::kI32: return Launch<int32_t>(gathered, ranks, count, out, s);
    case CommDType::kI64: return Launch<int64_t>(gathered, ranks, count, out, s);
    case CommDType::kU64: return Launch<uint64_t>(gathered, ranks, count, out, s);
    case CommDType::kF16:
    case CommDType::kBF16: break;
  }
  return Status::Internal("rank-ordered sum of ", CommDTypeName(dtype), " is not supported");
}

}  // namespace ember::nccl_kernels
