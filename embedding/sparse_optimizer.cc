#include "embedding/sparse_optimizer.h"

#include <cmath>
#include <string>

namespace ember::embedding {

Result<SparseOptimizer> ParseSparseOptimizer(const std::string& name) {
  if (name == "sgd") return SparseOptimizer::kSgd;
  if (name == "adagrad") return SparseOptimizer::kAdagrad;
  return Status::InvalidArgument("unknown sparse optimizer \"", name,
                                 "\"; valid names: sgd, adagrad");
}

const char* SparseOptimizerName(SparseOptimizer optimizer) {
  switch (optimizer) {
    case SparseOptimizer::kSgd:
      return "sgd";
    case SparseOptimizer::kAdagrad:
      return "adagrad";
  }
  return "unknown";
}

Status ValidateSparseOptimizerOptions(const SparseOptimizerOptions& options) {
  if (options.type != SparseOptimizer::kSgd && options.type != SparseOptimizer::kAdagrad) {
    return Status::InvalidArgument("optimizer.type: unknown sparse optimizer ",
                                   static_cast<int>(options.type));
  }
  // Written as !(x > 0) so that NaN is rejected too.
  if (!(options.learning_rate > 0.0f) || !std::isfinite(options.learning_rate)) {
    return Status::InvalidArgument("optimizer.learning_rate must be finite and > 0, got ",
                                   options.learning_rate);
  }
  if (!(options.initial_accumulator >= 0.0f) || !std::isfinite(options.initial_accumulator)) {
    return Status::InvalidArgument("optimizer.initial_accumulator must be finite and >= 0, got ",
                                   options.initial_accumulator);
  }
  if (!(options.epsilon >= 0.0f) || !std::isfinite(options.epsilon)) {
    return Status::InvalidArgument("optimizer.epsilon must be finite and >= 0, got ",
                                   options.epsilon);
  }
  return Status::OK();
}

int StateFloatsPerElement(SparseOptimizer type) {
  return type == SparseOptimizer::kAdagrad ? 1 : 0;
}

void InitOptimizerState(const SparseOptimizerOptions& options, int dim, float* state) {
  if (options.type != SparseOptimizer::kAdagrad) return;
  for (int e = 0; e < dim; ++e) state[e] = options.initial_accumulator;
}

void SgdUpdate(float learning_rate, int dim, const float* __restrict grad,
               float* __restrict weights) {
  for (int e = 0; e < dim; ++e) weights[e] -= learning_rate * grad[e];
}

void AdagradUpdate(float learning_rate, float epsilon, int dim, const float* __restrict grad,
                   float* __restrict weights, float* __restrict accumulator) {
  for (int e = 0; e < dim; ++e) {
    const float g = grad[e];
    const float acc = accumulator[e] + g * g;
    accumulator[e] = acc;
    weights[e] -= learning_rate * g / (std::sqrt(acc) + epsilon);
  }
}

void ApplySparseOptimizer(const SparseOptimizerOptions& options, int dim, const float* grad,
                          float* weights, float* state) {
  switch (options.type) {
    case SparseOptimizer::kSgd:
      SgdUpdate(options.learning_rate, dim, grad, weights);
      return;
    case SparseOptimizer::kAdagrad:
      AdagradUpdate(options.learning_rate, options.epsilon, dim, grad, weights, state);
      return;
  }
}

}  // namespace ember::embedding
