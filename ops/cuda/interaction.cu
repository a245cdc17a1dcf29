// Feature interactions on CUDA: DLRM's dot interaction through one strided
// batched SGEMM per direction (every sample's Gram matrix, then its lower
// triangle), and the FM second-order term through Rendle's O(F * D) identity.

#include "ops/cuda/blas.h"
#include "ops/cuda/common.h"
#include "ops/dense_ops_cuda.h"
#include "ops/fm_interaction.h"

namespace ember::ops {
namespace {

using cuda::DeviceScratch;

constexpr int kThreads = 256;

// The row i > j of the pair index p of the strictly lower triangle (row by
// row: (1,0), (2,0), (2,1), ...), so that p = i (i - 1) / 2 + j.
__device__ int64_t PairRow(int64_t p) {
  int64_t i = static_cast<int64_t>((1.0 + sqrt(8.0 * static_cast<double>(p) + 1.0)) / 2.0);
  while (i * (i - 1) / 2 > p) --i;
  while ((i + 1) * i / 2 <= p) ++i;
  return i;
}

// out[b, p] = gram[b, i, j] for the pair p = (i, j).
__global__ void GatherPairsKernel(const float* gram, int64_t batch, int64_t f, float* out) {
  const int64_t pairs = f * (f - 1) / 2;
  const int64_t n = batch * pairs;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = t / pairs, p = t % pairs;
    const int64_t i = PairRow(p), j = p - i * (i - 1) / 2;
    out[t] = gram[(b * f + i) * f + j];
  }
}

// sym[b, i, j] = dout[b, pair(max(i,j), min(i,j))], 0 on the diagonal: the
// matrix S with dF = S F.
__global__ void ScatterPairsKernel(const float* dout, int64_t batch, int64_t f, float* sym) {
  const int64_t pairs = f * (f - 1) / 2;
  const int64_t n = batch * f * f;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = t / (f * f), i = (t / f) % f, j = t % f;
    const int64_t hi = i > j ? i : j, lo = i > j ? j : i;
    sym[t] = i == j ? 0.0f : dout[b * pairs + hi * (hi - 1) / 2 + lo];
  }
}

Status CheckFeatures(const char* op, const Tensor& features, const Device& device) {
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceRank(op, "features", features, DType::kF32, 3, device));
  EMBER_RETURN_IF_ERROR(cuda::CheckFitsInt(op, "the batch", features.dim(0)));
  EMBER_RETURN_IF_ERROR(cuda::CheckFitsInt(op, "the number of features", features.dim(1)));
  EMBER_RETURN_IF_ERROR(cuda::CheckFitsInt(op, "the feature width", features.dim(2)));
  return cuda::CheckFitsInt(op, "features per sample", features.dim(1) * features.dim(2));
}

Status Zero(const char* op, Tensor* t, CudaStream& stream) {
  if (t->numel() == 0) return Status::OK();
  return cuda::CudaCall(cudaMemsetAsync(t->raw_data(), 0, t->nbytes(), cuda::Native(stream)), op,
                        "cudaMemsetAsync");
}

// --- FM -----------------------------------------------------------------------

constexpr int kFmThreads = 128;

// One block per sample (grid-stride over samples): each thread sums its
// columns d over the fields, then the block adds the threads' totals.
__global__ void FmForwardKernel(const float* x, int64_t batch, int64_t f, int64_t dim,
                                float* out) {
  __shared__ float warp_totals[kFmThreads / 32];
  for (int64_t b = blockIdx.x; b < batch; b += gridDim.x) {
    const float* sample = x + b * f * dim;
    float total = 0.0f;
    for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
      float sum = 0.0f, sum_sq = 0.0f;
      for (int64_t k = 0; k < f; ++k) {
        const float v = sample[k * dim + d];
        sum += v;
        sum_sq += v * v;
      }
      total += sum * sum - sum_sq;
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      total += __shfl_down_sync(0xffffffffu, total, offset);
    }
    if (threadIdx.x % 32 == 0) warp_totals[threadIdx.x / 32] = total;
    __syncthreads();
    if (threadIdx.x == 0) {
      float block_total = 0.0f;
      for (int w = 0; w < kFmThreads / 32; ++w) block_total += warp_totals[w];
      out[b] = 0.5f * block_total;
    }
    __syncthreads();  // warp_totals is reused by the next sample
  }
}

// One thread per (sample, d): dx_bfd = dout_b * (sum_g x_bgd - x_bfd).
__global__ void FmBackwardKernel(const float* x, const float* dout, int64_t batch, int64_t f,
                                 int64_t dim, float* dx) {
  const int64_t n = batch * dim;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = t / dim, d = t % dim;
    const float* sample = x + b * f * dim + d;
    float sum = 0.0f;
    for (int64_t k = 0; k < f; ++k) sum += sample[k * dim];
    const float g = dout[b];
    float* dsample = dx + b * f * dim + d;
    for (int64_t k = 0; k < f; ++k) dsample[k * dim] = g * (sum - sample[k * dim]);
  }
}

}  // namespace

Status DotInteractionForwardCuda(const Tensor& features, Tensor* out, CudaStream& stream) {
  constexpr const char* kOp = "DotInteractionForwardCuda";
  const Device device = Device::Cuda(stream.device());
  EMBER_RETURN_IF_ERROR(CheckFeatures(kOp, features, device));
  const int64_t batch = features.dim(0), f = features.dim(1), dim = features.dim(2);
  const int64_t pairs = f * (f - 1) / 2;
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceOutput(kOp, "out", out, DType::kF32, {batch, pairs}, device));
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  if (batch * pairs == 0) return Status::OK();
  if (dim == 0) return Zero(kOp, out, stream);
  const cudaStream_t s = cuda::Native(stream);
  DeviceScratch scratch(stream);
  EMBER_ASSIGN_OR_RETURN(float* gram, scratch.Get<float>(kOp, batch * f * f));
  EMBER_ASSIGN_OR_RETURN(cublasHandle_t blas, cuda::CublasFor(kOp, stream));
  // Per sample, features [F, D] row-major is column-major X [D, F]; the Gram
  // matrix X^T X [F, F] is symmetric, so its layout does not matter.
  const int fi = static_cast<int>(f), di = static_cast<int>(dim);
  const float one = 1.0f, zero = 0.0f;
  EMBER_RETURN_IF_ERROR(cuda::CublasCall(
      cublasSgemmStridedBatched(blas, CUBLAS_OP_T, CUBLAS_OP_N, fi, fi, di, &one,
                                features.data<float>(), di, f * dim, features.data<float>(), di,
                                f * dim, &zero, gram, fi, f * f, static_cast<int>(batch)),
      kOp, "cublasSgemmStridedBatched"));
  GatherPairsKernel<<<cuda::GridFor(batch * pairs, kThreads), kThreads, 0, s>>>(
      gram, batch, f, out->data<float>());
  return cuda::CheckLaunch(kOp, "GatherPairsKernel");
}

Status DotInteractionBackwardCuda(const Tensor& features, const Tensor& dout, Tensor* dfeatures,
                                  CudaStream& stream) {
  constexpr const char* kOp = "DotInteractionBackwardCuda";
  const Device device = Device::Cuda(stream.device());
  EMBER_RETURN_IF_ERROR(CheckFeatures(kOp, features, device));
  const int64_t batch = features.dim(0), f = features.dim(1), dim = features.dim(2);
  const int64_t pairs = f * (f - 1) / 2;
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceTensor(kOp, "dout", dout, DType::kF32, {batch, pairs}, device));
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceOutput(kOp, "dfeatures", dfeatures, DType::kF32,
                                                {batch, f, dim}, device));
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  if (batch * f * dim == 0) return Status::OK();
  if (pairs == 0) return Zero(kOp, dfeatures, stream);
  const cudaStream_t s = cuda::Native(stream);
  DeviceScratch scratch(stream);
  EMBER_ASSIGN_OR_RETURN(float* sym, scratch.Get<float>(kOp, batch * f * f));
  ScatterPairsKernel<<<cuda::GridFor(batch * f * f, kThreads), kThreads, 0, s>>>(
      dout.data<float>(), batch, f, sym);
  EMBER_RETURN_IF_ERROR(cuda::CheckLaunch(kOp, "ScatterPairsKernel"));
  EMBER_ASSIGN_OR_RETURN(cublasHandle_t blas, cuda::CublasFor(kOp, stream));
  // dF [F, D] = S F per sample: column-major dF^T [D, F] = X [D, F] S (S is
  // symmetric, so reading it column-major changes nothing).
  const int fi = static_cast<int>(f), di = static_cast<int>(dim);
  const float one = 1.0f, zero = 0.0f;
  return cuda::CublasCall(
      cublasSgemmStridedBatched(blas, CUBLAS_OP_N, CUBLAS_OP_N, di, fi, fi, &one,
                                features.data<float>(), di, f * dim, sym, fi, f * f, &zero,
                                dfeatures->data<float>(), di, f * dim, static_cast<int>(batch)),
      kOp, "cublasSgemmStridedBatched");
}

Status FmInteractionForwardCuda(const Tensor& features, Tensor* out, CudaStream& stream) {
  constexpr const char* kOp = "FmInteractionForwardCuda";
  const Device device = Device::Cuda(stream.device());
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceRank(kOp, "features", features, DType::kF32, 3, device));
  const int64_t batch = features.dim(0), f = features.dim(1), dim = features.dim(2);
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceOutput(kOp, "out", out, DType::kF32, {batch, 1}, device));
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  if (batch == 0) return Status::OK();
  const int blocks = static_cast<int>(batch < 65535 ? batch : 65535);
  FmForwardKernel<<<blocks, kFmThreads, 0, cuda::Native(stream)>>>(features.data<float>(), batch,
                                                                   f, dim, out->data<float>());
  return cuda::CheckLaunch(kOp, "FmForwardKernel");
}

Status FmInteractionBackwardCuda(const Tensor& features, const Tensor& dout, Tensor* dfeatures,
                                 CudaStream& stream) {
  constexpr const char* kOp = "FmInteractionBackwardCuda";
  const Device device = Device::Cuda(stream.device());
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceRank(kOp, "features", features, DType::kF32, 3, device));
  const int64_t batch = features.dim(0), f = features.dim(1), dim = features.dim(2);
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceTensor(kOp, "dout", dout, DType::kF32, {batch, 1}, device));
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceOutput(kOp, "dfeatures", dfeatures, DType::kF32,
                                                {batch, f, dim}, device));
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  if (batch * dim == 0 || f == 0) return Status::OK();
  FmBackwardKernel<<<cuda::GridFor(batch * dim, kThreads), kThreads, 0, cuda::Native(stream)>>>(
      features.data<float>(), dout.data<float>(), batch, f, dim, dfeatures->data<float>());
  return cuda::CheckLaunch(kOp, "FmBackwardKernel");
}

}  // namespace ember::ops
