// Sigmoid cross-entropy with logits on CUDA: per-element losses summed in
// double by fixed blocks (a fixed tree within each), the block sums added in
// order by one thread, so the loss is the same bits on every run.

#include "ops/cuda/common.h"
#include "ops/cuda/reduce.cuh"
#include "ops/dense_ops_cuda.h"

namespace ember::ops {
namespace {

constexpr int kThreads = 256;
// Elements per block: fixed by the data alone, which fixes the sum's order.
constexpr int64_t kBlockElements = 8192;
constexpr unsigned long long kNone = ~0ULL;

struct LossReport {
  double mean;
  unsigned long long bad_label;  // first index of a label outside [0, 1], or kNone
};

__device__ double StableSigmoid(double x) {
  if (x >= 0.0) return 1.0 / (1.0 + exp(-x));
  const double e = exp(x);
  return e / (1.0 + e);
}

__global__ void LossKernel(const float* z, const float* y, int64_t batch, float* dz,
                           double* partial, LossReport* report) {
  const int64_t begin = blockIdx.x * kBlockElements;
  const int64_t end = begin + kBlockElements < batch ? begin + kBlockElements : batch;
  const double inv_batch = 1.0 / static_cast<double>(batch);
  double sum = 0.0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const double zi = z[i];
    const float yi = y[i];
    if (!(yi >= 0.0f && yi <= 1.0f)) atomicMin(&report->bad_label, static_cast<unsigned long long>(i));
    sum += fmax(zi, 0.0) - zi * yi + log1p(exp(-fabs(zi)));
    if (dz != nullptr) dz[i] = static_cast<float>((StableSigmoid(zi) - yi) * inv_batch);
  }
  const double total = cuda::BlockSum<kThreads>(sum);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

__global__ void MeanKernel(const double* partial, int64_t blocks, int64_t batch,
                           LossReport* report) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  double total = 0.0;
  for (int64_t b = 0; b < blocks; ++b) total += partial[b];
  report->mean = total / static_cast<double>(batch);
}

}  // namespace

Result<double> SigmoidCrossEntropyWithLogitsCuda(const Tensor& logits, const Tensor& labels,
                                                 Tensor* dlogits, CudaStream& stream) {
  constexpr const char* kOp = "SigmoidCrossEntropyWithLogitsCuda";
  const Device device = Device::Cuda(stream.device());
  const bool column = logits.ndim() == 2 && logits.dim(1) == 1;
  if (!logits.defined() || logits.dtype() != DType::kF32 || logits.device() != device ||
      !(logits.ndim() == 1 || column)) {
    return Status::InvalidArgument(kOp, ": logits must be f32[B] or f32[B, 1] on ",
                                   device.ToString(), ", got ",
                                   logits.defined() ? logits.DebugString() : "an undefined tensor");
  }
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceTensor(kOp, "labels", labels, DType::kF32, logits.shape(), device));
  if (dlogits != nullptr) {
    EMBER_RETURN_IF_ERROR(
        cuda::CheckDeviceTensor(kOp, "dlogits", *dlogits, DType::kF32, logits.shape(), device));
  }
  const int64_t batch = logits.dim(0);
  if (batch == 0) {
    return Status::InvalidArgument(kOp, ": the batch is empty; its mean is undefined");
  }
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  const cudaStream_t s = cuda::Native(stream);
  const int64_t blocks = (batch + kBlockElements - 1) / kBlockElements;
  cuda::DeviceScratch scratch(stream);
  EMBER_ASSIGN_OR_RETURN(double* partial, scratch.Get<double>(kOp, blocks));
  EMBER_ASSIGN_OR_RETURN(LossReport * report, scratch.Get<LossReport>(kOp, 1));
  const LossReport initial{0.0, kNone};
  EMBER_RETURN_IF_ERROR(cuda::CudaCall(
      cudaMemcpyAsync(report, &initial, sizeof(initial), cudaMemcpyHostToDevice, s), kOp,
      "cudaMemcpyAsync"));
  LossKernel<<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(
      logits.data<float>(), labels.data<float>(), batch,
      dlogits != nullptr ? dlogits->data<float>() : nullptr, partial, report);
  EMBER_RETURN_IF_ERROR(cuda::CheckLaunch(kOp, "LossKernel"));
  MeanKernel<<<1, 1, 0, s>>>(partial, blocks, batch, report);
  EMBER_RETURN_IF_ERROR(cuda::CheckLaunch(kOp, "MeanKernel"));
  LossReport result{};
  EMBER_RETURN_IF_ERROR(cuda::CudaCall(
      cudaMemcpyAsync(&result, report, sizeof(result), cudaMemcpyDeviceToHost, s), kOp,
      "cudaMemcpyAsync"));
  EMBER_RETURN_IF_ERROR(stream.Synchronize().WithContext(kOp));
  if (result.bad_label != kNone) {
    return Status::InvalidArgument(kOp, ": labels[", result.bad_label, "] is outside [0, 1]");
  }
  return result.mean;
}

}  // namespace ember::ops
