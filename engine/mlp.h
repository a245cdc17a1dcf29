#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/dense_ops.h"
#include "ops/dense_optimizer.h"

namespace ember::engine {

// A trainable tensor with its gradient and optimizer state.
struct Parameter {
  Tensor value;
  Tensor grad;
  ops::DenseOptimizerSlot slot;
};

// A stack of fully connected layers: every hidden layer uses ReLU; the last
// layer uses `last_activation`. Keeps the activations of the latest Forward
// for Backward.
// Thread safety: none; one MLP belongs to one dense stage.
class Mlp {
 public:
  // widths = {input, hidden..., output}. Weights are He-uniform (Kaiming,
  // fan-in) drawn from RandomStream(seed, stream); biases start at zero.
  Mlp(const std::vector<int>& widths, ops::Activation last_activation, uint64_t seed,
      uint64_t stream);

  int input_width() const { return widths_.front(); }
  int output_width() const { return widths_.back(); }

  // out[B, output_width] from x[B, input_width]. `x` must stay alive and
  // unchanged until Backward.
  Status Forward(const Tensor& x, Tensor* out);
  // From dout[B, output_width], fills every parameter's grad and, when dx is
  // not null, dx[B, input_width].
  Status Backward(const Tensor& dout, Tensor* dx);

  std::vector<Parameter*> parameters();
  int64_t flops_per_example() const;

 private:
  Status EnsureBatch(int64_t batch);

  std::vector<int> widths_;
  ops::Activation last_activation_;
  std::vector<Parameter> weights_;
  std::vector<Parameter> biases_;
  Tensor input_;                     // The x of the last Forward.
  std::vector<Tensor> outputs_;      // Output of each layer for the last batch.
  std::vector<Tensor> grad_inputs_;  // Scratch: gradient w.r.t. each layer's input.
  int64_t batch_ = -1;
};

ops::Activation HiddenActivation();

}  // namespace ember::engine
