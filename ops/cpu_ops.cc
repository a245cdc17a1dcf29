// The operators of ops/ as registry entries with their CPU kernels: shape
// inference, cost, and thin adapters from KernelContext to the functions of
// dense_ops.h and the other op headers.
#include <cmath>
#include <cstring>

#include "ops/cross_layer.h"
#include "ops/dense_ops.h"
#include "ops/dropout.h"
#include "ops/fm_interaction.h"
#include "ops/kernel_helpers.h"
#include "ops/moe_routing.h"
#include "ops/moe_routing_ops.h"
#include "ops/op_registry.h"

namespace ember::ops {
namespace {

using Shapes = std::vector<std::vector<int64_t>>;

constexpr double kF32 = 4.0;

// A batched input of one dimension: its width.
Result<int64_t> Width(const std::vector<InputShape>& in, size_t i, const char* what) {
  if (i >= in.size() || !in[i].batched || in[i].shape.size() != 1) {
    return Status::InvalidArgument(what, " must be a batched vector");
  }
  return in[i].shape[0];
}

// --- fully_connected: y = act(x W^T + b) -----------------------------------

OpDef FullyConnectedDef() {
  OpDef def;
  def.name = "fully_connected";
  def.rows_independent = true;
  def.num_inputs = 3;
  def.infer = [](const std::vector<InputShape>& in, const OpAttrs& attrs) -> Result<Shapes> {
    EMBER_ASSIGN_OR_RETURN(const int64_t width, Width(in, 0, "the input"));
    const InputShape& w = in[1];
    const InputShape& b = in[2];
    if (w.batched || w.shape.size() != 2 || w.shape[1] != width) {
      return Status::InvalidArgument("the weight must be a [out, ", width, "] parameter");
    }
    if (b.batched || b.shape != std::vector<int64_t>{w.shape[0]}) {
      return Status::InvalidArgument("the bias must be a [", w.shape[0], "] parameter");
    }
    const int64_t act = attrs.GetInt("activation", 0);
    if (act != 0 && act != 1) return Status::InvalidArgument("activation must be 0 or 1");
    return Shapes{{w.shape[0]}};
  };
  def.cost = [](const std::vector<InputShape>& in, const OpAttrs&, int64_t batch, bool backward) {
    const double b = static_cast<double>(batch);
    const double k = static_cast<double>(in[0].shape[0]);
    const double n = static_cast<double>(in[1].shape[0]);
    // Forward: one GEMM; backward: two (dx, dW) plus the bias reduction.
    OpCost cost;
    cost.flops = backward ? 4 * b * k * n + b * n : 2 * b * k * n + b * n;
    cost.bytes = kF32 * (backward ? 2 * (b * k + k * n + n + b * n) : b * k + k * n + n + b * n);
    return cost;
  };
  return def;
}

Activation ActivationOf(const OpAttrs& attrs) {
  return attrs.GetInt("activation", 0) == 1 ? Activation::kRelu : Activation::kNone;
}

// The executor's bf16 copies of x, the weight and y (none when it keeps none).
Bf16Copies CopiesOf(const KernelContext& c) {
  Bf16Copies copies;
  if (c.input_bf16.size() > 1) copies.x = c.input_bf16[0], copies.weight = c.input_bf16[1];
  if (!c.output_bf16.empty()) copies.y = c.output_bf16[0];
  return copies;
}

KernelPair FullyConnectedCpu() {
  KernelPair k;
  k.forward = [](KernelContext& c) {
    return FullyConnectedForward(Flat(*c.inputs[0]), *c.inputs[1], *c.inputs[2],
                                 ActivationOf(*c.attrs), c.outputs[0], c.precision, CopiesOf(c));
  };
  k.backward = [](KernelContext& c) {
    Tensor dx;
    if (c.input_grads[0] != nullptr) dx = Flat(*c.input_grads[0]);
    return FullyConnectedBackward(
        Flat(*c.inputs[0]), *c.inputs[1], *c.outputs[0], *c.output_grads[0], ActivationOf(*c.attrs),
        c.input_grads[0] != nullptr ? &dx : nullptr, c.input_grads[1], c.input_grads[2],
        c.precision, CopiesOf(c), c.output_grads_disposable);
  };
  k.splits_parameter_gradients = true;
  return k;
}

// --- concat: the inputs' columns side by side ------------------------------

OpDef ConcatDef() {
  OpDef def;
  def.name = "concat";
  def.rows_independent = true;
  def.num_inputs = -1;
  def.infer = [](const std::vector<InputShape>& in, const OpAttrs&) -> Result<Shapes> {
    int64_t total = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      EMBER_ASSIGN_OR_RETURN(const int64_t width, Width(in, i, "every input"));
      total += width;
    }
    return Shapes{{total}};
  };
  def.cost = [](const std::vector<InputShape>& in, const OpAttrs&, int64_t batch, bool) {
    double width = 0;
    for (const InputShape& s : in) width += static_cast<double>(s.shape[0]);
    return OpCost{0.0, 2 * kF32 * static_cast<double>(batch) * width};
  };
  return def;
}

KernelPair ConcatCpu() {
  KernelPair k;
  k.forward = [](KernelContext& c) {
    std::vector<Tensor> parts;
    for (const Tensor* t : c.inputs) parts.push_back(Flat(*t));
    return ConcatColumns(parts, c.outputs[0]);
  };
  k.backward = [](KernelContext& c) {
    std::vector<Tensor> parts;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      // An input that needs no gradient still takes its columns somewhere.
      parts.push_back(c.input_grads[i] != nullptr ? Flat(*c.input_grads[i])
                                                  : Tensor::Empty(Flat(*c.inputs[i]).shape()));
    }
    return SplitColumns(*c.output_grads[0], &parts);
  };
  return k;
}

// --- dot_interaction: pairwise dots of F vectors of D ----------------------

OpDef DotInteractionDef() {
  OpDef def;
  def.name = "dot_interaction";
  def.rows_independent = true;
  def.num_inputs = 1;
  def.infer = [](const std::vector<InputShape>& in, const OpAttrs& attrs) -> Result<Shapes> {
    EMBER_ASSIGN_OR_RETURN(const int64_t width, Width(in, 0, "the input"));
    const int64_t f = attrs.GetInt("features", 0);
    if (f < 2 || width % f != 0) {
      return Status::InvalidArgument("features=", f, " must be >= 2 and divide the width ",
                                     width);
    }
    return Shapes{{f * (f - 1) / 2}};
  };
  def.cost = [](const std::vector<InputShape>& in, const OpAttrs& attrs, int64_t batch,
                bool backward) {
    const double b = static_cast<double>(batch);
    const double f = static_cast<double>(attrs.GetInt("features", 2));
    const double d = static_cast<double>(in[0].shape[0]) / f;
    const double pairs = f * (f - 1) / 2;
    OpCost cost;
    cost.flops = (backward ? 4 : 2) * b * pairs * d;
    cost.bytes = kF32 * b * ((backward ? 2 : 1) * f * d + pairs);
    return cost;
  };
  return def;
}

KernelPair DotInteractionCpu() {
  KernelPair k;
  auto as_3d = [](const Tensor& t, const OpAttrs& attrs) {
    const int64_t f = attrs.GetInt("features", 2);
    return t.Reshape({t.dim(0), f, t.numel() / t.dim(0) / f});
  };
  k.forward = [as_3d](KernelContext& c) {
    return DotInteractionForward(as_3d(*c.inputs[0], *c.attrs), c.outputs[0]);
  };
  k.backward = [as_3d](KernelContext& c) {
    if (c.input_grads[0] == nullptr) return Status::OK();
    Tensor dfeatures = as_3d(*c.input_grads[0], *c.attrs);
    return DotInteractionBackward(as_3d(*c.inputs[0], *c.attrs), *c.output_grads[0], &dfeatures);
  };
  return k;
}

// --- dlrm_interaction: [direct, dots of the F vectors of [direct, pooled]] ---

OpDef DlrmInteractionDef() {
  OpDef def;
  def.name = "dlrm_interaction";
  def.rows_independent = true;
  def.num_inputs = 2;
  def.infer = [](const std::vector<InputShape>& in, const OpAttrs&) -> Result<Shapes> {
    EMBER_ASSIGN_OR_RETURN(const int64_t dim, Width(in, 0, "the direct input"));
    EMBER_ASSIGN_OR_RETURN(const int64_t pooled, Width(in, 1, "the pooled input"));
    if (pooled % dim != 0) {
      return Status::InvalidArgument("the pooled width ", pooled,
                                     " must be a multiple of the direct width ", dim);
    }
    const int64_t f = pooled / dim + 1;
    return Shapes{{dim + f * (f - 1) / 2}};
  };
  def.cost = [](const std::vector<InputShape>& in, const OpAttrs&, int64_t batch, bool backward) {
    const double b = static_cast<double>(batch);
    const double d = static_cast<double>(in[0].shape[0]);
    const double f = static_cast<double>(in[1].shape[0]) / d + 1;
    const double pairs = f * (f - 1) / 2;
    OpCost cost;
    cost.flops = (backward ? 4 : 2) * b * pairs * d;
    cost.bytes = kF32 * b * ((backward ? 2 : 1) * f * d + pairs + d);
    return cost;
  };
  return def;
}

KernelPair DlrmInteractionCpu() {
  KernelPair k;
  k.forward = [](KernelContext& c) {
    return DlrmInteractionForward(Flat(*c.inputs[0]), Flat(*c.inputs[1]), c.outputs[0]);
  };
  k.backward = [](KernelContext& c) -> Status {
    // Both gradients come out of one pass; one nobody asked for goes to
    // scratch.
    Tensor ddirect = c.input_grads[0] != nullptr ? Flat(*c.input_grads[0])
                                                 : Tensor::Empty(Flat(*c.inputs[0]).shape());
    Tensor dpooled = c.input_grads[1] != nullptr ? Flat(*c.input_grads[1])
                                                 : Tensor::Empty(Flat(*c.inputs[1]).shape());
    return DlrmInteractionBackward(Flat(*c.inputs[0]), Flat(*c.inputs[1]), *c.output_grads[0],
                                   &ddirect, &dpooled);
  };
  return k;
}

// --- add: elementwise sum of two inputs of one shape -----------------------

OpDef AddDef() {
  OpDef def;
  def.name = "add";
  def.rows_independent = true;
  def.num_inputs = 2;
  def.infer = [](const std::vector<InputShape>& in, const OpAttrs&) -> Result<Shapes> {
    if (!in[0].batched || !in[1].batched || in[0].shape != in[1].shape) {
      return Status::InvalidArgument("add needs two batched inputs of one shape");
    }
    return Shapes{in[0].shape};
  };
  def.cost = [](const std::vector<InputShape>& in, const OpAttrs&, int64_t batch, bool) {
    double n = static_cast<double>(batch);
    for (int64_t d : in[0].shape) n *= static_cast<double>(d);
    return OpCost{n, 3 * kF32 * n};
  };
  return def;
}

KernelPair AddCpu() {
  KernelPair k;
  k.forward = [](KernelContext& c) {
    const float* a = c.inputs[0]->data<float>();
    const float* b = c.inputs[1]->data<float>();
    float* y = c.outputs[0]->data<float>();
    for (int64_t i = 0; i < c.outputs[0]->numel(); ++i) y[i] = a[i] + b[i];
    return Status::OK();
  };
  k.backward = [](KernelContext& c) {
    for (Tensor* d : c.input_grads) {
      if (d != nullptr) std::memcpy(d->raw_data(), c.output_grads[0]->raw_data(), d->nbytes());
    }
    return Status::OK();
  };
  return k;
}

// --- fm_interaction: FM second-order term of F vectors of D ----------------

OpDef FmInteractionDef() {
  OpDef def;
  def.name = "fm_interaction";
  def.rows_independent = true;
  def.num_inputs = 1;
  def.infer = [](const std::vector<InputShape>& in, const OpAttrs& attrs) -> Result<Shapes> {
    EMBER_ASSIGN_OR_RETURN(const int64_t width, Width(in, 0, "the input"));
    const int64_t f = attrs.GetInt("features", 0);
    if (f < 1 || width % f != 0) {
      return Status::InvalidArgument("features=", f, " must be >= 1 and divide the width ",
                                     width);
    }
    return Shapes{{1}};
  };
  def.cost = [](const std::vector<InputShape>& in, const OpAttrs& attrs, int64_t batch,
                bool backward) {
    const int64_t f = attrs.GetInt("features", 1);
    const int64_t d = in[0].shape[0] / f;
    return backward ? FmInteractionBackwardCost(batch, f, d) : FmInteractionForwardCost(batch, f, d);
  };
  return def;
}

KernelPair FmInteractionCpu() {
  KernelPair k;
  auto as_3d = [](const Tensor& t, const OpAttrs& attrs) {
    const int64_t f = attrs.GetInt("features", 1);
    return t.Reshape({t.dim(0), f, t.numel() / t.dim(0) / f});
  };
  k.forward = [as_3d](KernelContext& c) {
    return FmInteractionForward(as_3d(*c.inputs[0], *c.attrs), c.outputs[0]);
  };
  k.backward = [as_3d](KernelContext& c) {
    if (c.input_grads[0] == nullptr) return Status::OK();
    Tensor dfeatures = as_3d(*c.input_grads[0], *c.attrs);
    return FmInteractionBackward(as_3d(*c.inputs[0], *c.attrs), *c.output_grads[0], &dfeatures);
  };
  return k;
}

// --- cross_layer(_low_rank): DCN-v2 x0 * (W xl + b) + xl --------------------
// Output 0 is the layer's; the backward reads the others, saved by the
// forward: z = W xl + b, and for low rank first t = V^T xl.

OpDef CrossLayerDef(bool low_rank) {
  OpDef def;
  def.name = low_rank ? "cross_layer_low_rank" : "cross_layer";
  def.rows_independent = true;
  def.num_inputs = low_rank ? 5 : 4;
  def.saved_outputs = low_rank ? 2 : 1;
  def.infer = [low_rank](const std::vector<InputShape>& in, const OpAttrs&) -> Result<Shapes> {
    EMBER_ASSIGN_OR_RETURN(const int64_t d, Width(in, 0, "x0"));
    EMBER_ASSIGN_OR_RETURN(const int64_t dl, Width(in, 1, "xl"));
    if (dl != d) return Status::InvalidArgument("x0 has width ", d, ", xl ", dl);
    const size_t bias = low_rank ? 4 : 3;
    for (size_t i = 2; i < bias; ++i) {
      const InputShape& w = in[i];
      if (w.batched || w.shape.size() != 2 || w.shape[0] != d ||
          (!low_rank && w.shape[1] != d)) {
        return Status::InvalidArgument(low_rank ? "u and v must be [d, r]" : "the weight must be [",
                                       low_rank ? "" : std::to_string(d) + ", " +
                                                           std::to_string(d) + "]");
      }
    }
    if (low_rank && in[2].shape != in[3].shape) {
      return Status::InvalidArgument("u and v must have one shape [d, r]");
    }
    if (in[bias].batched || in[bias].shape != std::vector<int64_t>{d}) {
      return Status::InvalidArgument("the bias must be a [", d, "] parameter");
    }
    if (low_rank) return Shapes{{d}, {in[2].shape[1]}, {d}};  // out, t, z
    return Shapes{{d}, {d}};                                  // out, z
  };
  def.cost = [low_rank](const std::vector<InputShape>& in, const OpAttrs&, int64_t batch,
                        bool backward) {
    const int64_t d = in[0].shape[0];
    if (low_rank) {
      const int64_t r = in[2].shape[1];
      return backward ? LowRankCrossLayerBackwardCost(batch, d, r)
                      : LowRankCrossLayerForwardCost(batch, d, r);
    }
    return backward ? CrossLayerBackwardCost(batch, d) : CrossLayerForwardCost(batch, d);
  };
  return def;
}

KernelPair CrossLayerCpu(bool low_rank) {
  KernelPair k;
  k.forward = [low_rank](KernelContext& c) {
    const Tensor x0 = Flat(*c.inputs[0]), xl = Flat(*c.inputs[1]);
    if (low_rank) {
      return LowRankCrossLayerForward(x0, xl, *c.inputs[2], *c.inputs[3], *c.inputs[4],
                                      c.outputs[0], c.outputs[1], c.outputs[2]);
    }
    return CrossLayerForward(x0, xl, *c.inputs[2], *c.inputs[3], c.outputs[0], c.outputs[1]);
  };
  k.backward = [low_rank](KernelContext& c) {
    const Tensor x0 = Flat(*c.inputs[0]), xl = Flat(*c.inputs[1]);
    const Tensor* saved_z = c.outputs[low_rank ? 2 : 1];
    // The kernel writes every gradient: unneeded ones go to temporaries.
    std::vector<Tensor> grads;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      grads.push_back(c.input_grads[i] != nullptr ? *c.input_grads[i]
                                                  : Tensor::Empty(c.inputs[i]->shape()));
    }
    Tensor dx0 = Flat(grads[0]), dxl = Flat(grads[1]);
    if (low_rank) {
      return LowRankCrossLayerBackward(x0, xl, *c.inputs[2], *c.inputs[3], *c.inputs[4],
                                       *c.output_grads[0], &dx0, &dxl, &grads[2], &grads[3],
                                       &grads[4], c.outputs[1], saved_z);
    }
    return CrossLayerBackward(x0, xl, *c.inputs[2], *c.inputs[3], *c.output_grads[0], &dx0, &dxl,
                              &grads[2], &grads[3], saved_z);
  };
  return k;
}

// --- dropout (attrs rate, seed): identity outside training ------------------

OpDef DropoutDef() {
  OpDef def;
  def.name = "dropout";
  def.num_inputs = 1;
  def.infer = [](const std::vector<InputShape>& in, const OpAttrs& attrs) -> Result<Shapes> {
    if (!in[0].batched) return Status::InvalidArgument("dropout needs a batched input");
    const double rate = attrs.Get("rate", 0.0);
    if (!(rate >= 0.0 && rate < 1.0)) {
      return Status::InvalidArgument("dropout rate ", rate, " is not in [0, 1)");
    }
    return Shapes{in[0].shape};
  };
  def.cost = [](const std::vector<InputShape>& in, const OpAttrs&, int64_t batch, bool) {
    int64_t n = batch;
    for (int64_t d : in[0].shape) n *= d;
    return DropoutCost(n);
  };
  return def;
}

DropoutOptions DropoutOptionsOf(const KernelContext& c) {
  DropoutOptions options;
  options.rate = c.training ? c.attrs->Get("rate", 0.0) : 0.0;
  options.seed = static_cast<uint64_t>(c.attrs->GetInt("seed", 0));
  return options;
}

KernelPair DropoutCpu() {
  KernelPair k;
  k.forward = [](KernelContext& c) {
    return DropoutForward(*c.inputs[0], DropoutOptionsOf(c), static_cast<uint64_t>(c.step),
                          c.outputs[0]);
  };
  k.backward = [](KernelContext& c) {
    if (c.input_grads[0] == nullptr) return Status::OK();
    return DropoutBackward(*c.output_grads[0], DropoutOptionsOf(c), static_cast<uint64_t>(c.step),
                           c.input_grads[0]);
  };
  return k;
}

// --- softmax over each example's vector (a gate) -----------------------------

OpDef SoftmaxDef() {
  OpDef def;
  def.name = "softmax";
  def.rows_independent = true;
  def.num_inputs = 1;
  def.infer = [](const std::vector<InputShape>& in, const OpAttrs&) -> Result<Shapes> {
    EMBER_ASSIGN_OR_RETURN(const int64_t width, Width(in, 0, "the input"));
    return Shapes{{width}};
  };
  def.cost = [](const std::vector<InputShape>& in, const OpAttrs&, int64_t batch, bool backward) {
    const double n = static_cast<double>(batch) * static_cast<double>(in[0].shape[0]);
    return OpCost{(backward ? 3 : 4) * n, kF32 * (backward ? 3 : 2) * n};
  };
  return def;
}

KernelPair SoftmaxCpu() {
  KernelPair k;
  k.forward = [](KernelContext& c) { return SoftmaxForward(*c.inputs[0], c.outputs[0]); };
  k.backward = [](KernelContext& c) {
    if (c.input_grads[0] == nullptr) return Status::OK();
    return SoftmaxBackward(*c.outputs[0], *c.output_grads[0], c.input_grads[0]);
  };
  return k;
}

// --- mixture: MMoE's gate-weighted sum of expert outputs ----------------------

OpDef MixtureDef() {
  OpDef def;
  def.name = "mixture";
  def.rows_independent = true;
  def.num_inputs = 2;
  def.infer = [](const std::vector<InputShape>& in, const OpAttrs&) -> Result<Shapes> {
    EMBER_ASSIGN_OR_RETURN(const int64_t experts, Width(in, 0, "the gate"));
    EMBER_ASSIGN_OR_RETURN(const int64_t width, Width(in, 1, "the experts' outputs"));
    if (experts < 1 || width % experts != 0) {
      return Status::InvalidArgument("the experts' outputs (", width,
                                     " wide) must be the gate's ", experts,
                                     " experts side by side");
    }
    return Shapes{{width / experts}};
  };
  def.cost = [](const std::vector<InputShape>& in, const OpAttrs&, int64_t batch, bool backward) {
    const int64_t experts = in[0].shape[0];
    return MixtureCost(batch, experts, in[1].shape[0] / experts, backward);
  };
  return def;
}

KernelPair MixtureCpu() {
  KernelPair k;
  k.forward = [](KernelContext& c) {
    return MixtureForward(*c.inputs[0], *c.inputs[1], c.outputs[0]);
  };
  k.backward = [](KernelContext& c) {
    return MixtureBackward(*c.inputs[0], *c.inputs[1], *c.output_grads[0], c.input_grads[0],
                           c.input_grads[1]);
  };
  return k;
}

}  // namespace

Status RegisterCpuOps(OpRegistry* registry) {
  EMBER_RETURN_IF_ERROR(registry->RegisterOp(FullyConnectedDef()));
  EMBER_RETURN_IF_ERROR(
      registry->RegisterKernel("fully_connected", DeviceType::kCpu, FullyConnectedCpu()));
  EMBER_RETURN_IF_ERROR(registry->RegisterOp(ConcatDef()));
  EMBER_RETURN_IF_ERROR(registry->RegisterKernel("concat", DeviceType::kCpu, ConcatCpu()));
  EMBER_RETURN_IF_ERROR(registry->RegisterOp(DotInteractionDef()));
  EMBER_RETURN_IF_ERROR(
      registry->RegisterKernel("dot_interaction", DeviceType::kCpu, DotInteractionCpu()));
  EMBER_RETURN_IF_ERROR(registry->RegisterOp(DlrmInteractionDef()));
  EMBER_RETURN_IF_ERROR(
      registry->RegisterKernel("dlrm_interaction", DeviceType::kCpu, DlrmInteractionCpu()));
  EMBER_RETURN_IF_ERROR(registry->RegisterOp(AddDef()));
  EMBER_RETURN_IF_ERROR(registry->RegisterKernel("add", DeviceType::kCpu, AddCpu()));
  EMBER_RETURN_IF_ERROR(registry->RegisterOp(FmInteractionDef()));
  EMBER_RETURN_IF_ERROR(
      registry->RegisterKernel("fm_interaction", DeviceType::kCpu, FmInteractionCpu()));
  for (const bool low_rank : {false, true}) {
    EMBER_RETURN_IF_ERROR(registry->RegisterOp(CrossLayerDef(low_rank)));
    EMBER_RETURN_IF_ERROR(registry->RegisterKernel(CrossLayerDef(low_rank).name,
                                                   DeviceType::kCpu, CrossLayerCpu(low_rank)));
  }
  EMBER_RETURN_IF_ERROR(registry->RegisterOp(DropoutDef()));
  EMBER_RETURN_IF_ERROR(registry->RegisterKernel("dropout", DeviceType::kCpu, DropoutCpu()));
  EMBER_RETURN_IF_ERROR(registry->RegisterOp(SoftmaxDef()));
  EMBER_RETURN_IF_ERROR(registry->RegisterKernel("softmax", DeviceType::kCpu, SoftmaxCpu()));
  EMBER_RETURN_IF_ERROR(registry->RegisterOp(MixtureDef()));
  EMBER_RETURN_IF_ERROR(registry->RegisterKernel("mixture", DeviceType::kCpu, MixtureCpu()));
  return RegisterMoeRoutingOps(registry);
}

}  // namespace ember::ops
