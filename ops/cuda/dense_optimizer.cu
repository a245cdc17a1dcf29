// Dense optimizers (SGD, Adagrad, Adam/AdamW) and clipping by global norm on
// CUDA. The updates use the CPU operator's float arithmetic step for step,
// with each multiply and add rounded on its own (no fused multiply-add), so a
// step gives the same bits as DenseOptimizerStep. The norm is summed in double
// over fixed blocks (a fixed tree within each), block sums added in order.

#include <cmath>
#include <string>

#include "ops/cuda/common.h"
#include "ops/cuda/reduce.cuh"
#include "ops/dense_ops_cuda.h"

namespace ember::ops {
namespace {

constexpr int kThreads = 256;
// Elements per block of the norm; fixed, so the sum's order is fixed.
constexpr int64_t kNormBlock = 1 << 14;

#define EMBER_FOR_EACH_INDEX(i, n)                                                     \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

__global__ void SgdKernel(const float* g, float* w, int64_t n, float lr, float decay) {
  EMBER_FOR_EACH_INDEX(i, n) {
    w[i] = __fsub_rn(w[i], __fadd_rn(__fmul_rn(lr, g[i]), __fmul_rn(decay, w[i])));
  }
}

__global__ void AdagradKernel(const float* g, float* w, float* v, int64_t n, float lr, float decay,
                              float eps) {
  EMBER_FOR_EACH_INDEX(i, n) {
    const float gi = g[i];
    v[i] = __fadd_rn(v[i], __fmul_rn(gi, gi));
    const float step = __fdiv_rn(__fmul_rn(lr, gi), __fadd_rn(__fsqrt_rn(v[i]), eps));
    w[i] = __fsub_rn(w[i], __fadd_rn(step, __fmul_rn(decay, w[i])));
  }
}

__global__ void AdamKernel(const float* g, float* w, float* m, float* v, int64_t n, float b1,
                           float b2, float eps, float decay, float lr_corrected,
                           float inv_sqrt_correction2) {
  const float one_minus_b1 = 1.0f - b1, one_minus_b2 = 1.0f - b2;
  EMBER_FOR_EACH_INDEX(i, n) {
    const float gi = g[i];
    m[i] = __fadd_rn(__fmul_rn(b1, m[i]), __fmul_rn(one_minus_b1, gi));
    v[i] = __fadd_rn(__fmul_rn(b2, v[i]), __fmul_rn(__fmul_rn(one_minus_b2, gi), gi));
    const float denom = __fadd_rn(__fmul_rn(__fsqrt_rn(v[i]), inv_sqrt_correction2), eps);
    const float step = __fdiv_rn(__fmul_rn(lr_corrected, m[i]), denom);
    w[i] = __fsub_rn(w[i], __fadd_rn(step, __fmul_rn(decay, w[i])));
  }
}

__global__ void SquaresKernel(const float* data, int64_t n, double* partial) {
  const int64_t begin = blockIdx.x * kNormBlock;
  const int64_t end = begin + kNormBlock < n ? begin + kNormBlock : n;
  double sum = 0.0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    sum += static_cast<double>(data[i]) * data[i];
  }
  const double total = cuda::BlockSum<kThreads>(sum);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

__global__ void SumInOrderKernel(const double* partial, int64_t count, double* total) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  double sum = 0.0;
  for (int64_t i = 0; i < count; ++i) sum += partial[i];
  *total = sum;
}

__global__ void ScaleKernel(float* data, int64_t n, float scale) {
  EMBER_FOR_EACH_INDEX(i, n) { data[i] *= scale; }
}

#undef EMBER_FOR_EACH_INDEX

// DenseOptimizerStep's option checks.
Status CheckOptions(const char* op, const DenseOptimizerOptions& o) {
  if (!(o.learning_rate >= 0.0f) || !std::isfinite(o.learning_rate)) {
    return Status::InvalidArgument(op, ": learning_rate = ", o.learning_rate,
                                   ", expected a finite value >= 0");
  }
  if (!(o.weight_decay >= 0.0f) || !std::isfinite(o.weight_decay)) {
    return Status::InvalidArgument(op, ": weight_decay = ", o.weight_decay,
                                   ", expected a finite value >= 0");
  }
  if (!(o.epsilon >= 0.0f) || !std::isfinite(o.epsilon)) {
    return Status::InvalidArgument(op, ": epsilon = ", o.epsilon,
                                   ", expected a finite value >= 0");
  }
  if (o.type == DenseOptimizer::kAdam &&
      (!(o.beta1 >= 0.0f && o.beta1 < 1.0f) || !(o.beta2 >= 0.0f && o.beta2 < 1.0f))) {
    return Status::InvalidArgument(op, ": beta1 = ", o.beta1, " and beta2 = ", o.beta2,
                                   " must lie in [0, 1)");
  }
  return Status::OK();
}

Status CheckGrads(const char* op, const std::vector<Tensor>& grads, const Device& device) {
  for (size_t i = 0; i < grads.size(); ++i) {
    const std::string name = "grads[" + std::to_string(i) + "]";
    EMBER_RETURN_IF_ERROR(cuda::CheckDeviceAny(op, name.c_str(), grads[i], DType::kF32, device));
  }
  return Status::OK();
}

// The norm of `grads`, after CheckGrads; synchronises the stream.
Result<double> Norm(const char* op, const std::vector<Tensor>& grads, CudaStream& stream) {
  int64_t blocks = 0;
  for (const Tensor& g : grads) blocks += (g.numel() + kNormBlock - 1) / kNormBlock;
  if (blocks == 0) return 0.0;
  const cudaStream_t s = cuda::Native(stream);
  cuda::DeviceScratch scratch(stream);
  EMBER_ASSIGN_OR_RETURN(double* partial, scratch.Get<double>(op, blocks + 1));
  int64_t at = 0;
  for (const Tensor& g : grads) {
    const int64_t n = g.numel();
    const int64_t tensor_blocks = (n + kNormBlock - 1) / kNormBlock;
    if (tensor_blocks == 0) continue;
    SquaresKernel<<<static_cast<unsigned>(tensor_blocks), kThreads, 0, s>>>(g.data<float>(), n,
                                                                            partial + at);
    EMBER_RETURN_IF_ERROR(cuda::CheckLaunch(op, "SquaresKernel"));
    at += tensor_blocks;
  }
  SumInOrderKernel<<<1, 1, 0, s>>>(partial, blocks, partial + blocks);
  EMBER_RETURN_IF_ERROR(cuda::CheckLaunch(op, "SumInOrderKernel"));
  double total = 0.0;
  EMBER_RETURN_IF_ERROR(cuda::CudaCall(
      cudaMemcpyAsync(&total, partial + blocks, sizeof(double), cudaMemcpyDeviceToHost, s), op,
      "cudaMemcpyAsync"));
  EMBER_RETURN_IF_ERROR(stream.Synchronize().WithContext(op));
  return std::sqrt(total);
}

}  // namespace

Result<DenseOptimizerSlot> NewDenseOptimizerSlotCuda(const DenseOptimizerOptions& options,
                                                     const Tensor& param, CudaStream& stream) {
  constexpr const char* kOp = "NewDenseOptimizerSlotCuda";
  const Device device = Device::Cuda(stream.device());
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceAny(kOp, "param", param, DType::kF32, device));
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  DenseOptimizerSlot slot;
  auto zeros = [&](Tensor* t) -> Status {
    EMBER_ASSIGN_OR_RETURN(*t, Tensor::Allocate(param.shape(), DType::kF32, device));
    if (t->numel() == 0) return Status::OK();
    return cuda::CudaCall(cudaMemsetAsync(t->raw_data(), 0, t->nbytes(), cuda::Native(stream)),
                          kOp, "cudaMemsetAsync");
  };
  if (options.type == DenseOptimizer::kAdam) EMBER_RETURN_IF_ERROR(zeros(&slot.first_moment));
  if (options.type != DenseOptimizer::kSgd) EMBER_RETURN_IF_ERROR(zeros(&slot.second_moment));
  return slot;
}

Status DenseOptimizerStepCuda(const DenseOptimizerOptions& options, int64_t step,
                              const Tensor& grad, Tensor* param, DenseOptimizerSlot* slot,
                              CudaStream& stream) {
  constexpr const char* kOp = "DenseOptimizerStepCuda";
  EMBER_RETURN_IF_ERROR(CheckOptions(kOp, options));
  if (step < 1) return Status::InvalidArgument(kOp, ": step = ", step, ", expected >= 1");
  if (param == nullptr || slot == nullptr) {
    return Status::InvalidArgument(kOp, ": param and slot must not be null");
  }
  const Device device = Device::Cuda(stream.device());
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceAny(kOp, "param", *param, DType::kF32, device));
  const std::vector<int64_t>& shape = param->shape();
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceTensor(kOp, "grad", grad, DType::kF32, shape, device));
  if (options.type != DenseOptimizer::kSgd) {
    EMBER_RETURN_IF_ERROR(cuda::CheckDeviceTensor(kOp, "slot->second_moment", slot->second_moment,
                                                  DType::kF32, shape, device));
  }
  if (options.type == DenseOptimizer::kAdam) {
    EMBER_RETURN_IF_ERROR(cuda::CheckDeviceTensor(kOp, "slot->first_moment", slot->first_moment,
                                                  DType::kF32, shape, device));
  }
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  const int64_t n = param->numel();
  if (n == 0) return Status::OK();
  const cudaStream_t s = cuda::Native(stream);
  const int blocks = cuda::GridFor(n, kThreads);
  const float decay = options.learning_rate * options.weight_decay;
  switch (options.type) {
    case DenseOptimizer::kSgd:
      SgdKernel<<<blocks, kThreads, 0, s>>>(grad.data<float>(), param->data<float>(), n,
                                            options.learning_rate, decay);
      break;
    case DenseOptimizer::kAdagrad:
      AdagradKernel<<<blocks, kThreads, 0, s>>>(grad.data<float>(), param->data<float>(),
                                                slot->second_moment.data<float>(), n,
                                                options.learning_rate, decay, options.epsilon);
      break;
    case DenseOptimizer::kAdam: {
      // Bias corrections in double, exactly as the CPU operator computes them.
      const double c1 = 1.0 - std::pow(static_cast<double>(options.beta1),
                                       static_cast<double>(step));
      const double c2 = 1.0 - std::pow(static_cast<double>(options.beta2),
                                       static_cast<double>(step));
      AdamKernel<<<blocks, kThreads, 0, s>>>(
          grad.data<float>(), param->data<float>(), slot->first_moment.data<float>(),
          slot->second_moment.data<float>(), n, options.beta1, options.beta2, options.epsilon,
          decay, static_cast<float>(options.learning_rate / c1),
          static_cast<float>(1.0 / std::sqrt(c2)));
      break;
    }
  }
  return cuda::CheckLaunch(kOp, "optimizer kernel");
}

Result<double> GlobalNormCuda(const std::vector<Tensor>& grads, CudaStream& stream) {
  constexpr const char* kOp = "GlobalNormCuda";
  EMBER_RETURN_IF_ERROR(CheckGrads(kOp, grads, Device::Cuda(stream.device())));
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  return Norm(kOp, grads, stream);
}

Result<double> ClipByGlobalNormCuda(double max_norm, std::vector<Tensor>* grads,
                                    CudaStream& stream) {
  constexpr const char* kOp = "ClipByGlobalNormCuda";
  if (grads == nullptr) return Status::InvalidArgument(kOp, ": grads is null");
  if (!(max_norm > 0.0) || !std::isfinite(max_norm)) {
    return Status::InvalidArgument(kOp, ": max_norm = ", max_norm, "; expected finite and > 0");
  }
  EMBER_RETURN_IF_ERROR(CheckGrads(kOp, *grads, Device::Cuda(stream.device())));
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  EMBER_ASSIGN_OR_RETURN(const double norm, Norm(kOp, *grads, stream));
  if (!std::isfinite(norm) || norm <= max_norm) return norm;
  const float scale = static_cast<float>(max_norm / norm);
  for (Tensor& g : *grads) {
    const int64_t n = g.numel();
    if (n == 0) continue;
    ScaleKernel<<<cuda::GridFor(n, kThreads), kThreads, 0, cuda::Native(stream)>>>(
        g.data<float>(), n, scale);
    EMBER_RETURN_IF_ERROR(cuda::CheckLaunch(kOp, "ScaleKernel"));
  }
  return norm;
}

}  // namespace ember::ops
