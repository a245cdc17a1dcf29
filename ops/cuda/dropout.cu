// Inverted dropout on CUDA with the CPU operator's counter-based mask:
// element i of call `step` is kept iff UniformAt(seed, step, i) >= rate.

#include "core/random.h"
#include "ops/cuda/common.h"
#include "ops/dense_ops_cuda.h"

namespace ember::ops {
namespace {

constexpr int kThreads = 256;

// core/random.h's Mix64 and HashCombine, for the device; the GPU tests check
// that the masks agree element for element.
__device__ uint64_t DeviceMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

__device__ uint64_t DeviceHashCombine(uint64_t a, uint64_t b) {
  return DeviceMix64(a ^ DeviceMix64(b + 0x632be59bd9b4e019ULL));
}

// `key` = HashCombine(seed, step), so UniformAt(seed, step, i) is
// (HashCombine(key, i) >> 11) * 2^-53.
__global__ void DropoutKernel(const float* in, float* out, int64_t n, uint64_t key, double rate,
                              float scale) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double u =
        static_cast<double>(DeviceHashCombine(key, static_cast<uint64_t>(i)) >> 11) * 0x1.0p-53;
    out[i] = u >= rate ? in[i] * scale : 0.0f;
  }
}

Status ApplyMask(const char* op, const char* in_name, const char* out_name, const Tensor& in,
                 const DropoutOptions& options, uint64_t step, Tensor* out, CudaStream& stream) {
  if (!(options.rate >= 0.0 && options.rate < 1.0)) {
    return Status::InvalidArgument(op, ": rate = ", options.rate, " is outside [0, 1)");
  }
  const Device device = Device::Cuda(stream.device());
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceAny(op, in_name, in, DType::kF32, device));
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceOutput(op, out_name, out, DType::kF32, in.shape(), device));
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(op, stream));
  const int64_t n = in.numel();
  if (n == 0) return Status::OK();
  const cudaStream_t s = cuda::Native(stream);
  if (options.rate == 0.0) {
    if (out->raw_data() == in.raw_data()) return Status::OK();
    return cuda::CudaCall(
        cudaMemcpyAsync(out->raw_data(), in.raw_data(), in.nbytes(), cudaMemcpyDeviceToDevice, s),
        op, "cudaMemcpyAsync");
  }
  const float scale = static_cast<float>(1.0 / (1.0 - options.rate));
  DropoutKernel<<<cuda::GridFor(n, kThreads), kThreads, 0, s>>>(
      in.data<float>(), out->data<float>(), n, HashCombine(options.seed, step), options.rate,
      scale);
  return cuda::CheckLaunch(op, "DropoutKernel");
}

}  // namespace

Status DropoutForwardCuda(const Tensor& x, const DropoutOptions& options, uint64_t step,
                          Tensor* y, CudaStream& stream) {
  return ApplyMask("DropoutForwardCuda", "x", "y", x, options, step, y, stream);
}

Status DropoutBackwardCuda(const Tensor& dy, const DropoutOptions& options, uint64_t step,
                           Tensor* dx, CudaStream& stream) {
  return ApplyMask("DropoutBackwardCuda", "dy", "dx", dy, options, step, dx, stream);
}

}  // namespace ember::ops
