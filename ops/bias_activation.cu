#include "ops/bias_activation.cuh"

namespace ember::ops {
namespace {

__global__ void BiasActivationKernel(float* y, const float* bias, long long n, int cols,
                                     int relu) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const float v = y[i] + bias[i % cols];
    y[i] = relu && v < 0.0f ? 0.0f : v;
  }
}

}  // namespace

void LaunchBiasActivation(float* y, const float* bias, long long rows, int cols, int relu,
                          cudaStream_t stream) {
  const long long n = rows * cols;
  if (n == 0) return;
  const int threads = 256;
  const long long wanted = (n + threads - 1) / threads;
  const int blocks = static_cast<int>(wanted < 65535 ? wanted : 65535);
  BiasActivationKernel<<<blocks, threads, 0, stream>>>(y, bias, n, cols, relu);
}

}  // namespace ember::ops
