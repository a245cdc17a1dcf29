#include "engine/mlp.h"

#include <cmath>

#include "core/random.h"

namespace ember::engine {

ops::Activation HiddenActivation() { return ops::Activation::kRelu; }

Mlp::Mlp(const std::vector<int>& widths, ops::Activation last_activation, uint64_t seed,
         uint64_t stream)
    : widths_(widths), last_activation_(last_activation) {
  CHECK_GE(widths_.size(), 2u) << "an MLP needs an input and an output width";
  RandomStream random(seed, stream);
  for (size_t l = 0; l + 1 < widths_.size(); ++l) {
    const int in = widths_[l], out = widths_[l + 1];
    Parameter weight{Tensor::Empty({out, in}), Tensor::Zeros({out, in}), {}};
    const double bound = std::sqrt(6.0 / in);  // He-uniform for ReLU layers.
    float* w = weight.value.data<float>();
    for (int64_t i = 0; i < weight.value.numel(); ++i) {
      w[i] = static_cast<float>(random.Uniform(-bound, bound));
    }
    weights_.push_back(std::move(weight));
    biases_.push_back(Parameter{Tensor::Zeros({out}), Tensor::Zeros({out}), {}});
  }
}

Status Mlp::EnsureBatch(int64_t batch) {
  if (batch == batch_) return Status::OK();
  outputs_.clear();
  grad_inputs_.clear();
  for (size_t l = 0; l + 1 < widths_.size(); ++l) {
    outputs_.push_back(Tensor::Empty({batch, widths_[l + 1]}));
    grad_inputs_.push_back(Tensor::Empty({batch, widths_[l]}));
  }
  batch_ = batch;
  return Status::OK();
}

Status Mlp::Forward(const Tensor& x, Tensor* out) {
  if (x.ndim() != 2 || x.dim(1) != input_width()) {
    return Status::InvalidArgument("MLP input ", x.DebugString(), " does not have width ",
                                   input_width());
  }
  EMBER_RETURN_IF_ERROR(EnsureBatch(x.dim(0)));
  input_ = x;
  const Tensor* in = &x;
  for (size_t l = 0; l < weights_.size(); ++l) {
    const ops::Activation act =
        l + 1 == weights_.size() ? last_activation_ : HiddenActivation();
    EMBER_RETURN_IF_ERROR(ops::FullyConnectedForward(*in, weights_[l].value, biases_[l].value,
                                                     act, &outputs_[l]));
    in = &outputs_[l];
  }
  *out = outputs_.back();
  return Status::OK();
}

Status Mlp::Backward(const Tensor& dout, Tensor* dx) {
  if (batch_ < 0 || dout.ndim() != 2 || dout.dim(0) != batch_ || dout.dim(1) != output_width()) {
    return Status::InvalidArgument("MLP backward gradient ", dout.DebugString(),
                                   " does not match the last forward [", batch_, ", ",
                                   output_width(), "]");
  }
  Tensor dy = dout;
  for (int l = static_cast<int>(weights_.size()) - 1; l >= 0; --l) {
    const ops::Activation act =
        l + 1 == static_cast<int>(weights_.size()) ? last_activation_ : HiddenActivation();
    const Tensor& in = l == 0 ? input_ : outputs_[l - 1];
    Tensor* grad_in = nullptr;
    if (l > 0) {
      grad_in = &grad_inputs_[l];
    } else if (dx != nullptr) {
      grad_in = &grad_inputs_[0];
    }
    EMBER_RETURN_IF_ERROR(ops::FullyConnectedBackward(in, weights_[l].value, outputs_[l], dy, act,
                                                      grad_in, &weights_[l].grad,
                                                      &biases_[l].grad));
    if (grad_in != nullptr) dy = *grad_in;
  }
  if (dx != nullptr) *dx = grad_inputs_[0];
  return Status::OK();
}

std::vector<Parameter*> Mlp::parameters() {
  std::vector<Parameter*> params;
  for (size_t l = 0; l < weights_.size(); ++l) {
    params.push_back(&weights_[l]);
    params.push_back(&biases_[l]);
  }
  return params;
}

int64_t Mlp::flops_per_example() const {
  int64_t flops = 0;
  for (size_t l = 0; l + 1 < widths_.size(); ++l) {
    flops += 2LL * widths_[l] * widths_[l + 1];
  }
  return flops;
}

}  // namespace ember::engine
