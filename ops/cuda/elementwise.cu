// Elementwise kernels (activations, casts, the cross layer's products), the
// deterministic column sums, and the elementwise operators of
// ops/dense_ops_cuda.h built on them.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ops/cuda/common.h"
#include "ops/cuda/kernels.h"
#include "ops/dense_ops_cuda.h"

namespace ember::ops::cuda {
namespace {

constexpr int kThreads = 256;

// Grid-stride loop over [0, n) with 64-bit indices: any n fits any grid.
#define EMBER_FOR_EACH_INDEX(i, n)                                                     \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

__global__ void ReluKernel(const float* x, float* y, int64_t n) {
  EMBER_FOR_EACH_INDEX(i, n) { y[i] = x[i] > 0.0f ? x[i] : 0.0f; }
}

__global__ void ReluMaskKernel(const float* y, const float* dy, float* out, int64_t n) {
  EMBER_FOR_EACH_INDEX(i, n) { out[i] = y[i] > 0.0f ? dy[i] : 0.0f; }
}

__device__ float StableSigmoid(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
  const float e = expf(x);
  return e / (1.0f + e);
}

__global__ void SigmoidKernel(const float* x, float* y, int64_t n) {
  EMBER_FOR_EACH_INDEX(i, n) { y[i] = StableSigmoid(x[i]); }
}

__global__ void SigmoidBackwardKernel(const float* y, const float* dy, float* dx, int64_t n) {
  EMBER_FOR_EACH_INDEX(i, n) { dx[i] = dy[i] * y[i] * (1.0f - y[i]); }
}

__global__ void AddKernel(const float* a, const float* b, float* out, int64_t n) {
  EMBER_FOR_EACH_INDEX(i, n) { out[i] = a[i] + b[i]; }
}

__global__ void AccumulateKernel(const float* src, float* dst, int64_t n) {
  EMBER_FOR_EACH_INDEX(i, n) { dst[i] += src[i]; }
}

__global__ void CrossOutputKernel(const float* x0, const float* z, const float* xl, float* out,
                                  int64_t n) {
  EMBER_FOR_EACH_INDEX(i, n) { out[i] = x0[i] * z[i] + xl[i]; }
}

__global__ void CrossGradientsKernel(const float* dout, const float* z, const float* x0,
                                     float* dx0, float* g, int64_t n) {
  EMBER_FOR_EACH_INDEX(i, n) {
    const float d = dout[i];
    dx0[i] = d * z[i];
    g[i] = d * x0[i];
  }
}

__global__ void CastToBf16Kernel(const float* src, __nv_bfloat16* dst, int64_t n) {
  EMBER_FOR_EACH_INDEX(i, n) { dst[i] = __float2bfloat16_rn(src[i]); }
}

__global__ void CastToF16Kernel(const float* src, __half* dst, int64_t n) {
  EMBER_FOR_EACH_INDEX(i, n) { dst[i] = __float2half_rn(src[i]); }
}

#undef EMBER_FOR_EACH_INDEX

// Column sums: threads along the columns (coalesced), chunks of rows along y.
constexpr int kColumnThreads = 128;
constexpr int64_t kRowsPerChunkMin = 64;
constexpr int64_t kMaxChunks = 512;

int64_t NumChunks(int64_t rows) {
  const int64_t chunks = (rows + kRowsPerChunkMin - 1) / kRowsPerChunkMin;
  return chunks < 1 ? 1 : (chunks > kMaxChunks ? kMaxChunks : chunks);
}

__global__ void ColumnPartialSumsKernel(const float* m, int64_t rows, int64_t cols,
                                        int64_t rows_per_chunk, float* partial) {
  const int64_t col = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (col >= cols) return;
  const int64_t begin = blockIdx.y * rows_per_chunk;
  const int64_t end = begin + rows_per_chunk < rows ? begin + rows_per_chunk : rows;
  float sum = 0.0f;
  for (int64_t r = begin; r < end; ++r) sum += m[r * cols + col];
  partial[blockIdx.y * cols + col] = sum;
}

__global__ void SumPartialsKernel(const float* partial, int64_t chunks, int64_t cols,
                                  float* out) {
  for (int64_t col = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; col < cols;
       col += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (int64_t c = 0; c < chunks; ++c) sum += partial[c * cols + col];
    out[col] = sum;
  }
}

}  // namespace

void LaunchRelu(const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n > 0) ReluKernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(x, y, n);
}

void LaunchReluMask(const float* y, const float* dy, float* out, int64_t n, cudaStream_t stream) {
  if (n > 0) ReluMaskKernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(y, dy, out, n);
}

void LaunchSigmoid(const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n > 0) SigmoidKernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(x, y, n);
}

void LaunchSigmoidBackward(const float* y, const float* dy, float* dx, int64_t n,
                           cudaStream_t stream) {
  if (n > 0) SigmoidBackwardKernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(y, dy, dx, n);
}

void LaunchAdd(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream) {
  if (n > 0) AddKernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(a, b, out, n);
}

void LaunchAccumulate(const float* src, float* dst, int64_t n, cudaStream_t stream) {
  if (n > 0) AccumulateKernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(src, dst, n);
}

void LaunchCrossOutput(const float* x0, const float* z, const float* xl, float* out, int64_t n,
                       cudaStream_t stream) {
  if (n > 0) {
    CrossOutputKernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(x0, z, xl, out, n);
  }
}

void LaunchCrossGradients(const float* dout, const float* z, const float* x0, float* dx0,
                          float* g, int64_t n, cudaStream_t stream) {
  if (n > 0) {
    CrossGradientsKernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(dout, z, x0, dx0, g, n);
  }
}

void LaunchCastToBf16(const float* src, void* dst, int64_t n, cudaStream_t stream) {
  if (n > 0) {
    CastToBf16Kernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(
        src, static_cast<__nv_bfloat16*>(dst), n);
  }
}

void LaunchCastToF16(const float* src, void* dst, int64_t n, cudaStream_t stream) {
  if (n > 0) {
    CastToF16Kernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(src, static_cast<__half*>(dst),
                                                                   n);
  }
}

int64_t ColumnSumsScratch(int64_t rows, int64_t cols) { return NumChunks(rows) * cols; }

void LaunchColumnSums(const float* m, int64_t rows, int64_t cols, float* partial, float* out,
                      cudaStream_t stream) {
  if (cols <= 0) return;
  if (rows <= 0) {
    cudaMemsetAsync(out, 0, static_cast<size_t>(cols) * sizeof(float), stream);
    return;
  }
  const int64_t chunks = NumChunks(rows);
  const int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  const dim3 grid(static_cast<unsigned>((cols + kColumnThreads - 1) / kColumnThreads),
                  static_cast<unsigned>(chunks));
  ColumnPartialSumsKernel<<<grid, kColumnThreads, 0, stream>>>(m, rows, cols, rows_per_chunk,
                                                               partial);
  SumPartialsKernel<<<GridFor(cols, kThreads), kThreads, 0, stream>>>(partial, chunks, cols, out);
}

}  // namespace ember::ops::cuda

namespace ember::ops {
namespace {

using cuda::CheckDeviceAny;
using cuda::CheckDeviceOutput;
using cuda::CheckDeviceTensor;
using cuda::Native;

// Checks `in` (any shape) and `out` of the same shape on the stream's device.
Status CheckUnary(const char* op, const char* in_name, const Tensor& in, const char* out_name,
                  const Tensor* out, CudaStream& stream) {
  const Device device = Device::Cuda(stream.device());
  EMBER_RETURN_IF_ERROR(CheckDeviceAny(op, in_name, in, DType::kF32, device));
  EMBER_RETURN_IF_ERROR(CheckDeviceOutput(op, out_name, out, DType::kF32, in.shape(), device));
  return cuda::UseDevice(op, stream);
}

}  // namespace

Status ReluForwardCuda(const Tensor& x, Tensor* y, CudaStream& stream) {
  constexpr const char* kOp = "ReluForwardCuda";
  EMBER_RETURN_IF_ERROR(CheckUnary(kOp, "x", x, "y", y, stream));
  cuda::LaunchRelu(x.data<float>(), y->data<float>(), x.numel(), Native(stream));
  return cuda::CheckLaunch(kOp, "ReluKernel");
}

Status ReluBackwardCuda(const Tensor& y, const Tensor& dy, Tensor* dx, CudaStream& stream) {
  constexpr const char* kOp = "ReluBackwardCuda";
  EMBER_RETURN_IF_ERROR(CheckUnary(kOp, "y", y, "dx", dx, stream));
  EMBER_RETURN_IF_ERROR(
      CheckDeviceTensor(kOp, "dy", dy, DType::kF32, y.shape(), Device::Cuda(stream.device())));
  cuda::LaunchReluMask(y.data<float>(), dy.data<float>(), dx->data<float>(), y.numel(),
                       Native(stream));
  return cuda::CheckLaunch(kOp, "ReluMaskKernel");
}

Status SigmoidCuda(const Tensor& x, Tensor* out, CudaStream& stream) {
  constexpr const char* kOp = "SigmoidCuda";
  EMBER_RETURN_IF_ERROR(CheckUnary(kOp, "x", x, "out", out, stream));
  cuda::LaunchSigmoid(x.data<float>(), out->data<float>(), x.numel(), Native(stream));
  return cuda::CheckLaunch(kOp, "SigmoidKernel");
}

Status SigmoidBackwardCuda(const Tensor& out, const Tensor& dout, Tensor* dx, CudaStream& stream) {
  constexpr const char* kOp = "SigmoidBackwardCuda";
  EMBER_RETURN_IF_ERROR(CheckUnary(kOp, "out", out, "dx", dx, stream));
  EMBER_RETURN_IF_ERROR(CheckDeviceTensor(kOp, "dout", dout, DType::kF32, out.shape(),
                                          Device::Cuda(stream.device())));
  cuda::LaunchSigmoidBackward(out.data<float>(), dout.data<float>(), dx->data<float>(),
                              out.numel(), Native(stream));
  return cuda::CheckLaunch(kOp, "SigmoidBackwardKernel");
}

Status AddCuda(const Tensor& a, const Tensor& b, Tensor* out, CudaStream& stream) {
  constexpr const char* kOp = "AddCuda";
  EMBER_RETURN_IF_ERROR(CheckUnary(kOp, "a", a, "out", out, stream));
  EMBER_RETURN_IF_ERROR(
      CheckDeviceTensor(kOp, "b", b, DType::kF32, a.shape(), Device::Cuda(stream.device())));
  cuda::LaunchAdd(a.data<float>(), b.data<float>(), out->data<float>(), a.numel(), Native(stream));
  return cuda::CheckLaunch(kOp, "AddKernel");
}

}  // namespace ember::ops
