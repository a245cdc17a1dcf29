// Dense optimizers: SGD, Adagrad (Duchi et al. 2011) and Adam (Kingma & Ba
// 2015, Algorithm 1), each with optional decoupled weight decay (Loshchilov &
// Hutter 2019: w -= lr * wd * w, AdamW for Adam).

#include "ops/dense_optimizer.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/simd.h"
#include "core/threads.h"
#include "ops/internal/tensor_checks.h"

namespace ember::ops {
namespace {

// Elements per parallel chunk; the loops are elementwise, so any split gives
// the same bits.
constexpr int64_t kElementGrain = 1 << 15;

Status CheckOptions(const DenseOptimizerOptions& o) {
  constexpr const char* kOp = "DenseOptimizerStep";
  if (!(o.learning_rate >= 0.0f) || !std::isfinite(o.learning_rate)) {
    return Status::InvalidArgument(kOp, ": learning_rate = ", o.learning_rate,
                                   ", expected a finite value >= 0");
  }
  if (!(o.weight_decay >= 0.0f) || !std::isfinite(o.weight_decay)) {
    return Status::InvalidArgument(kOp, ": weight_decay = ", o.weight_decay,
                                   ", expected a finite value >= 0");
  }
  if (!(o.epsilon >= 0.0f) || !std::isfinite(o.epsilon)) {
    return Status::InvalidArgument(kOp, ": epsilon = ", o.epsilon,
                                   ", expected a finite value >= 0");
  }
  if (o.type == DenseOptimizer::kAdam) {
    if (!(o.beta1 >= 0.0f && o.beta1 < 1.0f) || !(o.beta2 >= 0.0f && o.beta2 < 1.0f)) {
      return Status::InvalidArgument(kOp, ": beta1 = ", o.beta1, " and beta2 = ", o.beta2,
                                     " must lie in [0, 1)");
    }
  }
  return Status::OK();
}

// The updates of elements [begin, end), compiled per ISA level
// (core/simd.h): elementwise IEEE operations, the same bits on every copy.
EMBER_MULTIVERSIONED
void SgdRange(float lr, float decay, const float* g, float* w, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) w[i] -= lr * g[i] + decay * w[i];
}

EMBER_MULTIVERSIONED
void AdagradRange(float lr, float decay, float eps, const float* g, float* w, float* v,
                  int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    v[i] += g[i] * g[i];
    w[i] -= lr * g[i] / (std::sqrt(v[i]) + eps) + decay * w[i];
  }
}

EMBER_MULTIVERSIONED
void AdamRange(float b1, float b2, float eps, float decay, float lr_corrected,
               float inv_sqrt_correction2, const float* g, float* w, float* m, float* v,
               int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    m[i] = b1 * m[i] + (1.0f - b1) * g[i];
    v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
    // lr * m_hat / (sqrt(v_hat) + eps) with m_hat = m / c1, v_hat = v / c2.
    const float denom = std::sqrt(v[i]) * inv_sqrt_correction2 + eps;
    w[i] -= lr_corrected * m[i] / denom + decay * w[i];
  }
}

void SgdStep(const DenseOptimizerOptions& o, const float* g, float* w, int64_t n) {
  const float lr = o.learning_rate, decay = o.learning_rate * o.weight_decay;
  ParallelFor(0, n, kElementGrain,
              [&](int64_t begin, int64_t end) { SgdRange(lr, decay, g, w, begin, end); });
}

void AdagradStep(const DenseOptimizerOptions& o, const float* g, float* w, float* v, int64_t n) {
  const float lr = o.learning_rate, decay = o.learning_rate * o.weight_decay, eps = o.epsilon;
  ParallelFor(0, n, kElementGrain, [&](int64_t begin, int64_t end) {
    AdagradRange(lr, decay, eps, g, w, v, begin, end);
  });
}

void AdamStep(const DenseOptimizerOptions& o, int64_t step, const float* g, float* w, float* m,
              float* v, int64_t n) {
  const float b1 = o.beta1, b2 = o.beta2, eps = o.epsilon;
  const float decay = o.learning_rate * o.weight_decay;
  // Bias corrections 1 - beta^t, in double: beta2^t is close to 1 for many steps.
  const double correction1 = 1.0 - std::pow(static_cast<double>(b1), static_cast<double>(step));
  const double correction2 = 1.0 - std::pow(static_cast<double>(b2), static_cast<double>(step));
  const float lr_corrected = static_cast<float>(o.learning_rate / correction1);
  const float inv_sqrt_correction2 = static_cast<float>(1.0 / std::sqrt(correction2));
  ParallelFor(0, n, kElementGrain, [&](int64_t begin, int64_t end) {
    AdamRange(b1, b2, eps, decay, lr_corrected, inv_sqrt_correction2, g, w, m, v, begin, end);
  });
}

}  // namespace

Result<DenseOptimizer> ParseDenseOptimizer(const std::string& name) {
  if (name == "sgd") return DenseOptimizer::kSgd;
  if (name == "adagrad") return DenseOptimizer::kAdagrad;
  if (name == "adam") return DenseOptimizer::kAdam;
  return Status::InvalidArgument("unknown dense optimizer '", name,
                                 "'; expected sgd, adagrad or adam");
}

const char* DenseOptimizerName(DenseOptimizer optimizer) {
  switch (optimizer) {
    case DenseOptimizer::kSgd:
      return "sgd";
    case DenseOptimizer::kAdagrad:
      return "adagrad";
    case DenseOptimizer::kAdam:
      return "adam";
  }
  return "unknown";
}

DenseOptimizerSlot NewDenseOptimizerSlot(const DenseOptimizerOptions& options,
                                         const Tensor& param) {
  DenseOptimizerSlot slot;
  if (options.type == DenseOptimizer::kAdam) slot.first_moment = Tensor::Zeros(param.shape());
  if (options.type != DenseOptimizer::kSgd) slot.second_moment = Tensor::Zeros(param.shape());
  return slot;
}

Status DenseOptimizerStep(const DenseOptimizerOptions& options, int64_t step, const Tensor& grad,
                          Tensor* param, DenseOptimizerSlot* slot) {
  constexpr const char* kOp = "DenseOptimizerStep";
  EMBER_RETURN_IF_ERROR(CheckOptions(options));
  if (step < 1) return Status::InvalidArgument(kOp, ": step = ", step, ", expected >= 1");
  if (param == nullptr || slot == nullptr) {
    return Status::InvalidArgument(kOp, ": param and slot must not be null");
  }
  if (!param->defined() || param->dtype() != DType::kF32 || !param->device().is_cpu()) {
    return Status::InvalidArgument(kOp, ": param must be an f32 tensor on cpu, got ",
                                   param->defined() ? param->DebugString() : "an undefined tensor");
  }
  const std::vector<int64_t>& shape = param->shape();
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "grad", grad, DType::kF32, shape));
  const int64_t n = param->numel();
  switch (options.type) {
    case DenseOptimizer::kSgd:
      SgdStep(options, grad.data<float>(), param->data<float>(), n);
      break;
    case DenseOptimizer::kAdagrad:
      EMBER_RETURN_IF_ERROR(
          CheckTensor(kOp, "slot->second_moment", slot->second_moment, DType::kF32, shape));
      AdagradStep(options, grad.data<float>(), param->data<float>(),
                  slot->second_moment.data<float>(), n);
      break;
    case DenseOptimizer::kAdam:
      EMBER_RETURN_IF_ERROR(
          CheckTensor(kOp, "slot->first_moment", slot->first_moment, DType::kF32, shape));
      EMBER_RETURN_IF_ERROR(
          CheckTensor(kOp, "slot->second_moment", slot->second_moment, DType::kF32, shape));
      AdamStep(options, step, grad.data<float>(), param->data<float>(),
               slot->first_moment.data<float>(), slot->second_moment.data<float>(), n);
      break;
  }
  return Status::OK();
}

void to_json(Json& j, const DenseOptimizerOptions& o) {
  j = Json{{"type", DenseOptimizerName(o.type)}, {"learning_rate", o.learning_rate},
           {"beta1", o.beta1},                   {"beta2", o.beta2},
           {"epsilon", o.epsilon},               {"weight_decay", o.weight_decay}};
}

void from_json(const Json& j, DenseOptimizerOptions& o) {
  JsonFields f(j);
  std::string type;
  f.Get("type", &type);
  Result<DenseOptimizer> parsed = ParseDenseOptimizer(type);
  if (!parsed.ok()) throw JsonFieldError("type", "is invalid: " + parsed.status().message());
  o.type = *parsed;
  f.Get("learning_rate", &o.learning_rate);
  f.Get("beta1", &o.beta1);
  f.Get("beta2", &o.beta2);
  f.Get("epsilon", &o.epsilon);
  f.Get("weight_decay", &o.weight_decay);
  f.Done();
}

}  // namespace ember::ops
