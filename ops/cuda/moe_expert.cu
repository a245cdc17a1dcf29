// The auxiliary load-balancing loss of moe_balance (ops/moe_expert_ops.h) on
// CUDA: the top-1 counts with one thread per example (integer atomics, so
// the counts do not depend on the order the threads run in), then one thread
// per example for its share and one per element for the gradient. The f64
// arithmetic is the CPU kernel's, operation by operation and rounded the same
// way (no fused multiply-adds), so that the results are the CPU's bits.

#include <cmath>

#include "ops/cuda/common.h"
#include "ops/moe_routing_cuda.h"

namespace ember::ops {
namespace {

constexpr int kThreads = 256;

#define EMBER_FOR_EACH_INDEX(i, n)                                                       \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// counts[e] += the examples whose largest probability is e's (ties to the
// lower index; a NaN never wins a comparison, as on the CPU).
__global__ void TopOneCountsKernel(const float* p, int64_t batch, int64_t experts,
                                   unsigned long long* counts) {
  EMBER_FOR_EACH_INDEX(b, batch) {
    const float* row = p + b * experts;
    int64_t best = 0;
    for (int64_t e = 1; e < experts; ++e) {
      if (row[e] > row[best]) best = e;
    }
    atomicAdd(&counts[best], 1ULL);
  }
}

// f_e = counts[e] / batch, in f64 as the CPU's TopOneFractions.
__device__ double Fraction(const unsigned long long* counts, int64_t e, int64_t batch) {
  return __ddiv_rn(static_cast<double>(counts[e]), static_cast<double>(batch));
}

// share[b] = (E / examples) * sum_e f_e * p[b, e], the sum in expert order.
__global__ void BalanceSharesKernel(const float* p, const unsigned long long* counts, int64_t batch,
                                    int64_t experts, int64_t examples, float* share) {
  const double scale = __ddiv_rn(static_cast<double>(experts), static_cast<double>(examples));
  EMBER_FOR_EACH_INDEX(b, batch) {
    const float* row = p + b * experts;
    double sum = 0.0;
    for (int64_t e = 0; e < experts; ++e) {
      sum = __dadd_rn(sum, __dmul_rn(Fraction(counts, e, batch), static_cast<double>(row[e])));
    }
    share[b] = static_cast<float>(__dmul_rn(scale, sum));
  }
}

// dprobs[b, e] = dout[b, e] + f32(weight * E * f_e / examples).
__global__ void BalanceGradientKernel(const float* dout, const unsigned long long* counts,
                                      int64_t batch, int64_t experts, double weight,
                                      int64_t examples, float* dprobs) {
  EMBER_FOR_EACH_INDEX(i, batch * experts) {
    const int64_t e = i % experts;
    const double scaled =
        __dmul_rn(__dmul_rn(weight, static_cast<double>(experts)), Fraction(counts, e, batch));
    const float add = static_cast<float>(__ddiv_rn(scaled, static_cast<double>(examples)));
    dprobs[i] = __fadd_rn(dout[i], add);
  }
}

#undef EMBER_FOR_EACH_INDEX

// probs f32 [B, E] on `device` with E >= 1.
Status CheckProbs(const char* op, const Tensor& probs, const Device& device) {
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceRank(op, "probs", probs, DType::kF32, 2, device));
  if (probs.dim(1) < 1) {
    return Status::InvalidArgument(op, ": probs must have at least one expert, got ",
                                   probs.DebugString());
  }
  return Status::OK();
}

Status Copy(const char* op, const Tensor& src, Tensor* dst, cudaStream_t stream) {
  if (src.nbytes() == 0) return Status::OK();
  return cuda::CudaCall(cudaMemcpyAsync(dst->raw_data(), src.raw_data(), src.nbytes(),
                                        cudaMemcpyDeviceToDevice, stream),
                        op, "cudaMemcpyAsync");
}

// The top-1 counts of `probs` [B, E] (B >= 1) in scratch.
Result<unsigned long long*> TopOneCounts(const char* op, const Tensor& probs,
                                         cuda::DeviceScratch& scratch, cudaStream_t stream) {
  const int64_t batch = probs.dim(0), experts = probs.dim(1);
  EMBER_ASSIGN_OR_RETURN(unsigned long long* counts, scratch.Get<unsigned long long>(op, experts));
  EMBER_RETURN_IF_ERROR(cuda::CudaCall(
      cudaMemsetAsync(counts, 0, static_cast<size_t>(experts) * sizeof(unsigned long long), stream),
      op, "cudaMemsetAsync"));
  TopOneCountsKernel<<<cuda::GridFor(batch, kThreads), kThreads, 0, stream>>>(
      probs.data<float>(), batch, experts, counts);
  EMBER_RETURN_IF_ERROR(cuda::CheckLaunch(op, "TopOneCountsKernel"));
  return counts;
}

// The examples the objective is a mean over: at least the batch (as the CPU
// kernel's LossExamples).
int64_t LossExamples(int64_t loss_examples, int64_t batch) {
  return loss_examples > batch ? loss_examples : batch;
}

}  // namespace

Status MoeBalanceForwardCuda(const Tensor& probs, int64_t loss_examples, Tensor* out, Tensor* share,
                             CudaStream& stream) {
  constexpr const char* kOp = "MoeBalanceForwardCuda";
  const Device device = Device::Cuda(stream.device());
  EMBER_RETURN_IF_ERROR(CheckProbs(kOp, probs, device));
  const int64_t batch = probs.dim(0), experts = probs.dim(1);
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceOutput(kOp, "out", out, DType::kF32, probs.shape(), device));
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceOutput(kOp, "share", share, DType::kF32, {batch}, device));
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  const cudaStream_t s = cuda::Native(stream);
  EMBER_RETURN_IF_ERROR(Copy(kOp, probs, out, s));
  if (batch == 0) return Status::OK();
  cuda::DeviceScratch scratch(stream);
  EMBER_ASSIGN_OR_RETURN(const unsigned long long* counts, TopOneCounts(kOp, probs, scratch, s));
  BalanceSharesKernel<<<cuda::GridFor(batch, kThreads), kThreads, 0, s>>>(
      probs.data<float>(), counts, batch, experts, LossExamples(loss_examples, batch),
      share->data<float>());
  return cuda::CheckLaunch(kOp, "BalanceSharesKernel");
}

Status MoeBalanceBackwardCuda(const Tensor& probs, const Tensor& dout, double weight,
                              int64_t loss_examples, Tensor* dprobs, CudaStream& stream) {
  constexpr const char* kOp = "MoeBalanceBackwardCuda";
  const Device device = Device::Cuda(stream.device());
  EMBER_RETURN_IF_ERROR(CheckProbs(kOp, probs, device));
  const int64_t batch = probs.dim(0), experts = probs.dim(1);
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceTensor(kOp, "dout", dout, DType::kF32, probs.shape(), device));
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceOutput(kOp, "dprobs", dprobs, DType::kF32, probs.shape(), device));
  if (!(weight >= 0.0) || !std::isfinite(weight)) {
    return Status::InvalidArgument(kOp, ": weight = ", weight, " must be finite and >= 0");
  }
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  const cudaStream_t s = cuda::Native(stream);
  if (batch == 0 || weight == 0.0) return Copy(kOp, dout, dprobs, s);
  cuda::DeviceScratch scratch(stream);
  EMBER_ASSIGN_OR_RETURN(const unsigned long long* counts, TopOneCounts(kOp, probs, scratch, s));
  BalanceGradientKernel<<<cuda::GridFor(batch * experts, kThreads), kThreads, 0, s>>>(
      dout.data<float>(), counts, batch, experts, weight, LossExamples(loss_examples, batch),
      dprobs->data<float>());
  return cuda::CheckLaunch(kOp, "BalanceGradientKernel");
}

}  // namespace ember::ops
