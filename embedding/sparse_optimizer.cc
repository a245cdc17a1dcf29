#include "embedding/sparse_optimizer.h"

#include <cmath>
#include <string>

#include "core/simd.h"

namespace ember::embedding {

Result<SparseOptimizer> ParseSparseOptimizer(const std::string& name) {
  if (name == "sgd") return SparseOptimizer::kSgd;
  if (name == "adagrad") return SparseOptimizer::kAdagrad;
  if (name == "adam") return SparseOptimizer::kAdam;
  if (name == "ftrl") return SparseOptimizer::kFtrl;
  if (name == "rowwise_adagrad") return SparseOptimizer::kRowWiseAdagrad;
  return Status::InvalidArgument("unknown sparse optimizer \"", name,
                                 "\"; valid names: sgd, adagrad, adam, ftrl, rowwise_adagrad");
}

const char* SparseOptimizerName(SparseOptimizer optimizer) {
  switch (optimizer) {
    case SparseOptimizer::kSgd:
      return "sgd";
    case SparseOptimizer::kAdagrad:
      return "adagrad";
    case SparseOptimizer::kAdam:
      return "adam";
    case SparseOptimizer::kFtrl:
      return "ftrl";
    case SparseOptimizer::kRowWiseAdagrad:
      return "rowwise_adagrad";
  }
  return "unknown";
}

namespace {

// Written as !(x >= lo) so that NaN is rejected too.
bool FiniteAtLeast(float x, float lo) { return x >= lo && std::isfinite(x); }
bool InUnitInterval(float x) { return x >= 0.0f && x < 1.0f; }

}  // namespace

Status ValidateSparseOptimizerOptions(const SparseOptimizerOptions& options) {
  switch (options.type) {
    case SparseOptimizer::kSgd:
    case SparseOptimizer::kAdagrad:
    case SparseOptimizer::kAdam:
    case SparseOptimizer::kFtrl:
    case SparseOptimizer::kRowWiseAdagrad:
      break;
    default:
      return Status::InvalidArgument("optimizer.type: unknown sparse optimizer ",
                                     static_cast<int>(options.type));
  }
  if (!(options.learning_rate > 0.0f) || !std::isfinite(options.learning_rate)) {
    return Status::InvalidArgument("optimizer.learning_rate must be finite and > 0, got ",
                                   options.learning_rate);
  }
  if (!FiniteAtLeast(options.initial_accumulator, 0.0f)) {
    return Status::InvalidArgument("optimizer.initial_accumulator must be finite and >= 0, got ",
                                   options.initial_accumulator);
  }
  if (!FiniteAtLeast(options.epsilon, 0.0f)) {
    return Status::InvalidArgument("optimizer.epsilon must be finite and >= 0, got ",
                                   options.epsilon);
  }
  if (options.type == SparseOptimizer::kAdam && !(options.epsilon > 0.0f)) {
    return Status::InvalidArgument("optimizer.epsilon must be > 0 for adam, got ", options.epsilon);
  }
  if (!InUnitInterval(options.beta1)) {
    return Status::InvalidArgument("optimizer.beta1 must be in [0, 1), got ", options.beta1);
  }
  if (!InUnitInterval(options.beta2)) {
    return Status::InvalidArgument("optimizer.beta2 must be in [0, 1), got ", options.beta2);
  }
  if (!FiniteAtLeast(options.ftrl_beta, 0.0f)) {
    return Status::InvalidArgument("optimizer.ftrl_beta must be finite and >= 0, got ",
                                   options.ftrl_beta);
  }
  if (!FiniteAtLeast(options.l1, 0.0f)) {
    return Status::InvalidArgument("optimizer.l1 must be finite and >= 0, got ", options.l1);
  }
  if (!FiniteAtLeast(options.l2, 0.0f)) {
    return Status::InvalidArgument("optimizer.l2 must be finite and >= 0, got ", options.l2);
  }
  return Status::OK();
}

int64_t StateFloatsPerRow(SparseOptimizer type, int dim) {
  switch (type) {
    case SparseOptimizer::kSgd:
      return 0;
    case SparseOptimizer::kAdagrad:
      return dim;
    case SparseOptimizer::kAdam:
      return int64_t{2} * dim + 1;
    case SparseOptimizer::kFtrl:
      return int64_t{2} * dim;
    case SparseOptimizer::kRowWiseAdagrad:
      return 1;
  }
  return 0;
}

void InitOptimizerState(const SparseOptimizerOptions& options, int dim, float* state) {
  switch (options.type) {
    case SparseOptimizer::kSgd:
      return;
    case SparseOptimizer::kAdagrad:
      for (int e = 0; e < dim; ++e) state[e] = options.initial_accumulator;
      return;
    case SparseOptimizer::kAdam:
      for (int64_t e = 0; e < 2 * int64_t{dim} + 1; ++e) state[e] = 0.0f;
      return;
    case SparseOptimizer::kFtrl:
      for (int e = 0; e < dim; ++e) state[e] = 0.0f;
      for (int e = 0; e < dim; ++e) state[dim + e] = options.initial_accumulator;
      return;
    case SparseOptimizer::kRowWiseAdagrad:
      state[0] = options.initial_accumulator;
      return;
  }
}

void SgdUpdate(float learning_rate, int dim, const float* __restrict grad,
               float* __restrict weights) {
  for (int e = 0; e < dim; ++e) weights[e] -= learning_rate * grad[e];
}

// Compiled per ISA level (core/simd.h): a row of 16 is one AVX-512 square
// root and division instead of four SSE ones; the same bits on every copy.
EMBER_MULTIVERSIONED
void AdagradUpdate(float learning_rate, float epsilon, int dim, const float* __restrict grad,
                   float* __restrict weights, float* __restrict accumulator) {
  for (int e = 0; e < dim; ++e) {
    const float g = grad[e];
    const float acc = accumulator[e] + g * g;
    accumulator[e] = acc;
    weights[e] -= learning_rate * g / (std::sqrt(acc) + epsilon);
  }
}

void RowWiseAdagradUpdate(float learning_rate, float epsilon, int dim,
                          const float* __restrict grad, float* __restrict weights,
                          float* __restrict accumulator) {
  float sum_squares = 0.0f;
  for (int e = 0; e < dim; ++e) sum_squares += grad[e] * grad[e];
  const float acc = accumulator[0] + sum_squares / static_cast<float>(dim);
  accumulator[0] = acc;
  const float step = learning_rate / (std::sqrt(acc) + epsilon);
  for (int e = 0; e < dim; ++e) weights[e] -= step * grad[e];
}

void AdamUpdate(const SparseOptimizerOptions& options, int dim, const float* __restrict grad,
                float* __restrict weights, float* __restrict state) {
  float* __restrict m = state;
  float* __restrict v = state + dim;
  float& t = state[2 * int64_t{dim}];
  t += 1.0f;
  // The corrections once per row, in double: pow of a float base near 1 loses
  // digits that the reciprocal below would magnify for small t.
  const double steps = t;
  const float c1 = static_cast<float>(1.0 / (1.0 - std::pow(double{options.beta1}, steps)));
  const float c2 = static_cast<float>(1.0 / (1.0 - std::pow(double{options.beta2}, steps)));
  const float b1 = options.beta1;
  const float b2 = options.beta2;
  const float lr = options.learning_rate;
  const float eps = options.epsilon;
  for (int e = 0; e < dim; ++e) {
    const float g = grad[e];
    const float m_e = b1 * m[e] + (1.0f - b1) * g;
    const float v_e = b2 * v[e] + (1.0f - b2) * g * g;
    m[e] = m_e;
    v[e] = v_e;
    weights[e] -= lr * (m_e * c1) / (std::sqrt(v_e * c2) + eps);
  }
}

float FtrlWeight(const SparseOptimizerOptions& options, float z, float n) {
  if (std::abs(z) <= options.l1) return 0.0f;
  const float shrunk = z - std::copysign(options.l1, z);
  return -shrunk / ((options.ftrl_beta + std::sqrt(n)) / options.learning_rate + options.l2);
}

void FtrlUpdate(const SparseOptimizerOptions& options, int dim, const float* __restrict grad,
                float* __restrict weights, float* __restrict state) {
  float* __restrict z = state;
  float* __restrict n = state + dim;
  const float inv_alpha = 1.0f / options.learning_rate;
  for (int e = 0; e < dim; ++e) {
    const float g = grad[e];
    const float g2 = g * g;
    const float n_new = n[e] + g2;
    const float root_sum = std::sqrt(n_new) + std::sqrt(n[e]);
    // sqrt(n + g^2) - sqrt(n) without cancellation; 0 when both roots are 0.
    const float sigma = root_sum > 0.0f ? g2 / root_sum * inv_alpha : 0.0f;
    z[e] += g - sigma * weights[e];
    n[e] = n_new;
    weights[e] = FtrlWeight(options, z[e], n_new);
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
    case SparseOptimizer::kAdam:
      AdamUpdate(options, dim, grad, weights, state);
      return;
    case SparseOptimizer::kFtrl:
      FtrlUpdate(options, dim, grad, weights, state);
      return;
    case SparseOptimizer::kRowWiseAdagrad:
      RowWiseAdagradUpdate(options.learning_rate, options.epsilon, dim, grad, weights, state);
      return;
  }
}

}  // namespace ember::embedding
