#pragma once

#include <cstdint>
#include <string>

#include "core/json_fwd.h"
#include "core/status.h"
#include "core/tensor.h"

namespace ember::ops {

enum class DenseOptimizer { kSgd, kAdagrad, kAdam };

// Parses "sgd", "adagrad" or "adam".
Result<DenseOptimizer> ParseDenseOptimizer(const std::string& name);
const char* DenseOptimizerName(DenseOptimizer optimizer);

struct DenseOptimizerOptions {
  DenseOptimizer type = DenseOptimizer::kAdam;
  float learning_rate = 1e-3f;
  // Adam: decay rates of the first and second moment estimates.
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  // Adam and Adagrad: added to the root of the second moment.
  float epsilon = 1e-8f;
  // Decoupled weight decay, w -= learning_rate * weight_decay * w, for every
  // optimizer (AdamW when > 0 with Adam).
  float weight_decay = 0.0f;
};

// The options as JSON (core/json.h), the type by name ("adam"); from_json is
// strict: a missing or unknown field is an error naming it.
void to_json(Json& j, const DenseOptimizerOptions& options);
void from_json(const Json& j, DenseOptimizerOptions& options);

// The state of one parameter tensor under a dense optimizer.
struct DenseOptimizerSlot {
  Tensor first_moment;   // Adam's m; unused otherwise.
  Tensor second_moment;  // Adam's v, Adagrad's accumulator.
};

// Allocates zeroed state for `param` as the optimizer needs it.
DenseOptimizerSlot NewDenseOptimizerSlot(const DenseOptimizerOptions& options,
                                         const Tensor& param);

// One update of `param` with `grad` (same shape). `step` counts updates from
// 1 and drives Adam's bias correction (Kingma & Ba 2015, Algorithm 1).
// Elementwise, so the result does not depend on the thread count. Returns
// InvalidArgument on a shape mismatch, a slot without the state the optimizer
// needs, step < 1, or options out of range (negative rates, beta outside [0, 1)).
Status DenseOptimizerStep(const DenseOptimizerOptions& options, int64_t step,
                          const Tensor& grad, Tensor* param, DenseOptimizerSlot* slot);

}  // namespace ember::ops
