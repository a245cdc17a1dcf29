#pragma once

// A deterministic block reduction in double for the CUDA operators: the
// threads' values are added in a fixed tree whose shape depends only on the
// block size, so a fixed launch gives the same bits on every run.

namespace ember::ops::cuda {

// Sum of `value` over the block; the result is valid in thread 0.
// REQUIRES: blockDim.x == kBlockThreads, a power of two; every thread calls.
template <int kBlockThreads>
__device__ double BlockSum(double value) {
  __shared__ double partial[kBlockThreads];
  partial[threadIdx.x] = value;
  __syncthreads();
  for (int stride = kBlockThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  const double total = partial[0];
  __syncthreads();  // partial may be reused by the caller's next call
  return total;
}

}  // namespace ember::ops::cuda
