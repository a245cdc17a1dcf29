// moe_route, moe_dispatch and moe_combine (ops/moe_routing_ops.h): their
// shapes, costs and CPU kernels, thin adapters from KernelContext to the
// functions of ops/moe_routing.h.

#include "ops/moe_routing_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/kernel_helpers.h"
#include "ops/moe_expert_ops.h"
#include "ops/moe_routing.h"

namespace ember::ops {
namespace {

using Shapes = std::vector<std::vector<int64_t>>;

constexpr double kF32 = 4.0;
// An f32 holds every integer of magnitude below 2^24 exactly: the bound on
// the experts and slots a routing value carries.
constexpr int64_t kMaxIndex = int64_t{1} << 24;

struct RouteAttrs {
  int64_t k = 1;
  int64_t slots = 1;
  bool normalize = false;
};

RouteAttrs RouteAttrsOf(const OpAttrs& attrs) {
  RouteAttrs a;
  a.k = attrs.GetInt("k", 1);
  a.slots = attrs.GetInt("slots", a.k);
  a.normalize = attrs.GetInt("normalize", 0) == 1;
  return a;
}

// The batched [2, k] routing input at `i`: its k.
Result<int64_t> RoutingWidth(const std::vector<InputShape>& in, size_t i) {
  if (i >= in.size() || !in[i].batched || in[i].shape.size() != 2 || in[i].shape[0] != 2 ||
      in[i].shape[1] < 1) {
    return Status::InvalidArgument("the routing must be a batched [2, k] value (of moe_route)");
  }
  return in[i].shape[1];
}

// A batched value of `rank` dimensions at `i`, named `what` in errors.
Status CheckBatched(const std::vector<InputShape>& in, size_t i, size_t rank, const char* what) {
  if (i >= in.size() || !in[i].batched || in[i].shape.size() != rank) {
    return Status::InvalidArgument(what, " must be a batched value of ", rank, " dimension",
                                   rank == 1 ? "" : "s");
  }
  return Status::OK();
}

// The attr `name`, at least 1 (and below kMaxIndex).
Result<int64_t> CountAttr(const OpAttrs& attrs, const char* name, int64_t fallback) {
  const int64_t value = attrs.GetInt(name, fallback);
  if (value < 1 || value >= kMaxIndex) {
    return Status::InvalidArgument(name, "=", value, " must be in [1, ", kMaxIndex, ")");
  }
  return value;
}

// The optional attr "capacity_factor": 0 (none) or finite and > 0.
Status CheckCapacityFactor(const OpAttrs& attrs) {
  const double factor = attrs.Get("capacity_factor", 0.0);
  if (!std::isfinite(factor) || factor < 0.0) {
    return Status::InvalidArgument("capacity_factor=", factor, " must be 0 (none) or finite and > 0");
  }
  return Status::OK();
}

// The capacity of a batch, refused when a routing value could not hold its
// slots exactly.
Result<int64_t> Capacity(int64_t batch, int64_t experts, int64_t slots, int64_t k,
                         const OpAttrs& attrs) {
  const int64_t capacity = MoeNodeCapacity(batch, experts, slots, k, attrs);
  if (capacity >= kMaxIndex) {
    return Status::InvalidArgument("a batch of ", batch, " tokens gives ", capacity,
                                   " slots per expert, more than a routing value holds (",
                                   kMaxIndex, ")");
  }
  return capacity;
}

// routing [B, 2, k] -> the i32 experts and slots of a MoeRouting (its gate
// is left undefined: the kernels take the gate as a value of its own).
Result<MoeRouting> DecodeRouting(const Tensor& encoded, int64_t experts, int64_t capacity,
                                 bool normalize) {
  const int64_t batch = encoded.dim(0), k = Flat(encoded).dim(1) / 2;
  MoeRouting routing;
  routing.num_experts = experts;
  routing.capacity = capacity;
  routing.normalize_gates = normalize;
  routing.expert = Tensor::Empty({batch, k}, DType::kI32);
  routing.slot = Tensor::Empty({batch, k}, DType::kI32);
  const float* in = encoded.data<float>();
  int32_t* expert = routing.expert.data<int32_t>();
  int32_t* slot = routing.slot.data<int32_t>();
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t j = 0; j < k; ++j) {
      const float e = in[b * 2 * k + j], s = in[(b * 2 + 1) * k + j];
      // Checked before the conversion, which is undefined out of range;
      // MoeDispatch and MoeCombine check the ranges themselves.
      if (!(std::fabs(e) < kMaxIndex && std::fabs(s) < kMaxIndex) || e != std::nearbyint(e) ||
          s != std::nearbyint(s)) {
        return Status::InvalidArgument("routing[", b, ", :, ", j, "] = (", e, ", ", s,
                                       ") is not an expert and a slot");
      }
      expert[b * k + j] = static_cast<int32_t>(e);
      slot[b * k + j] = static_cast<int32_t>(s);
    }
  }
  return routing;
}

void EncodeRouting(const MoeRouting& routing, Tensor* encoded) {
  const int64_t batch = routing.expert.dim(0), k = routing.expert.dim(1);
  const int32_t* expert = routing.expert.data<int32_t>();
  const int32_t* slot = routing.slot.data<int32_t>();
  float* out = encoded->data<float>();
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t j = 0; j < k; ++j) {
      out[b * 2 * k + j] = static_cast<float>(expert[b * k + j]);
      out[(b * 2 + 1) * k + j] = static_cast<float>(slot[b * k + j]);
    }
  }
}

// The experts' buffers [E, capacity, H] at the front of the batch's [B, S, H].
Tensor Buffers(const Tensor& batch_rows, int64_t experts, int64_t capacity) {
  const int64_t hidden = batch_rows.dim(2);
  return batch_rows.Reshape({batch_rows.dim(0) * batch_rows.dim(1), hidden})
      .Slice(0, experts * capacity)
      .Reshape({experts, capacity, hidden});
}

// Zeroes the rows of [B, S, H] after the experts' buffers.
void ZeroPadding(Tensor* batch_rows, int64_t experts, int64_t capacity) {
  const int64_t hidden = batch_rows->dim(2);
  float* data = batch_rows->data<float>();
  const int64_t used = experts * capacity * hidden;
  std::memset(data + used, 0, static_cast<size_t>(batch_rows->numel() - used) * sizeof(float));
}

void ZeroIfWanted(Tensor* grad) {
  if (grad != nullptr) std::memset(grad->raw_data(), 0, grad->nbytes());
}

// --- moe_route: probs [E] -> gate [k], routing [2, k] ---------------------------

OpDef RouteDef() {
  OpDef def;
  def.name = "moe_route";
  def.num_inputs = 1;
  def.infer = [](const std::vector<InputShape>& in, const OpAttrs& attrs) -> Result<Shapes> {
    EMBER_RETURN_IF_ERROR(CheckBatched(in, 0, 1, "the probabilities"));
    const int64_t experts = in[0].shape[0];
    if (experts < 1 || experts >= kMaxIndex) {
      return Status::InvalidArgument("the probabilities' ", experts, " experts must be in [1, ",
                                     kMaxIndex, ")");
    }
    EMBER_ASSIGN_OR_RETURN(const int64_t k, CountAttr(attrs, "k", 1));
    if (k > experts) return Status::InvalidArgument("k=", k, " exceeds the ", experts, " experts");
    EMBER_RETURN_IF_ERROR(CountAttr(attrs, "slots", k).status());
    EMBER_RETURN_IF_ERROR(CheckCapacityFactor(attrs));
    const int64_t normalize = attrs.GetInt("normalize", 0);
    if (normalize != 0 && normalize != 1)
      return Status::InvalidArgument("normalize must be 0 or 1");
    return Shapes{{k}, {2, k}};
  };
  def.rows_grouped = true;  // Capacity and slots per group: ops/op_registry.h.
  def.cost = [](const std::vector<InputShape>& in, const OpAttrs& attrs, int64_t batch,
                bool backward) {
    const RouteAttrs a = RouteAttrsOf(attrs);
    const int64_t experts = in[0].shape[0];
    return backward ? MoeGateBackwardCost(batch, experts, a.k, a.normalize)
                    : RouteTopKCost(batch, experts, a.k, a.normalize);
  };
  return def;
}

// The backward of an inference forward (token-major, without capacity;
// moe_routing_ops.h) is refused.
Status NoBackwardOfInference(const KernelContext& c, const char* op) {
  if (c.training) return Status::OK();
  return Status::FailedPrecondition(op, ": no backward of an inference forward");
}

KernelPair RouteCpu() {
  KernelPair k;
  k.forward = [](KernelContext& c) -> Status {
    const Tensor probs = Flat(*c.inputs[0]);
    const RouteAttrs a = RouteAttrsOf(*c.attrs);
    MoeRoutingOptions options;
    options.k = static_cast<int>(a.k);
    options.normalize_gates = a.normalize;
    // Inference: no expert is ever full (a token takes at most one of an
    // expert's rows); each token's choices then go to its own rows.
    EMBER_ASSIGN_OR_RETURN(options.capacity,
                           c.training ? Capacity(probs.dim(0), probs.dim(1), a.slots, a.k, *c.attrs)
                                      : Result<int64_t>(std::max<int64_t>(probs.dim(0), 1)));
    EMBER_ASSIGN_OR_RETURN(MoeRouting routing, RouteTopK(probs, options));
    if (!c.training) {
      int32_t* slot = routing.slot.data<int32_t>();
      float* gate = routing.gate.data<float>();
      for (int64_t b = 0; b < probs.dim(0); ++b) {
        for (int64_t j = 0; j < a.k; ++j) {
          slot[b * a.k + j] = j < a.slots ? static_cast<int32_t>(j) : -1;
          if (j >= a.slots) gate[b * a.k + j] = 0.0f;
        }
      }
    }
    std::memcpy(c.outputs[0]->raw_data(), routing.gate.raw_data(), routing.gate.nbytes());
    EncodeRouting(routing, c.outputs[1]);
    return Status::OK();
  };
  k.backward = [](KernelContext& c) -> Status {
    EMBER_RETURN_IF_ERROR(NoBackwardOfInference(c, "moe_route"));
    // The routing output has no gradient: what reaches it is ignored.
    if (c.input_grads[0] == nullptr) return Status::OK();
    const Tensor probs = Flat(*c.inputs[0]);
    const RouteAttrs a = RouteAttrsOf(*c.attrs);
    EMBER_ASSIGN_OR_RETURN(const int64_t capacity, Capacity(probs.dim(0), probs.dim(1), a.slots, a.k, *c.attrs));
    EMBER_ASSIGN_OR_RETURN(const MoeRouting routing,
                           DecodeRouting(*c.outputs[1], probs.dim(1), capacity, a.normalize));
    Tensor dprobs = Flat(*c.input_grads[0]);
    return MoeGateBackward(probs, routing, Flat(*c.output_grads[0]), &dprobs);
  };
  return k;
}

// --- moe_dispatch: x [H], routing [2, k] -> buffers [S, H] -----------------------

OpDef DispatchDef() {
  OpDef def;
  def.name = "moe_dispatch";
  def.num_inputs = 2;
  def.infer = [](const std::vector<InputShape>& in, const OpAttrs& attrs) -> Result<Shapes> {
    EMBER_RETURN_IF_ERROR(CheckBatched(in, 0, 1, "the tokens"));
    EMBER_ASSIGN_OR_RETURN(const int64_t k, RoutingWidth(in, 1));
    EMBER_ASSIGN_OR_RETURN(const int64_t experts, CountAttr(attrs, "experts", 0));
    EMBER_ASSIGN_OR_RETURN(const int64_t slots, CountAttr(attrs, "slots", 0));
    EMBER_RETURN_IF_ERROR(CheckCapacityFactor(attrs));
    if (k > experts) return Status::InvalidArgument("k=", k, " exceeds the ", experts, " experts");
    return Shapes{{slots, in[0].shape[0]}};
  };
  def.rows_grouped = true;  // Capacity and slots per group: ops/op_registry.h.
  def.cost = [](const std::vector<InputShape>& in, const OpAttrs& attrs, int64_t batch,
                bool backward) {
    const int64_t hidden = in[0].shape[0], k = in[1].shape[1];
    const int64_t experts = attrs.GetInt("experts", 1), slots = attrs.GetInt("slots", 1);
    const int64_t capacity = MoeNodeCapacity(batch, experts, slots, k, attrs);
    if (backward) return MoeDispatchBackwardCost(batch, k, hidden);
    OpCost cost = MoeDispatchCost(batch, experts, capacity, k, hidden);
    cost.bytes += kF32 * static_cast<double>((batch * slots - experts * capacity) * hidden);
    return cost;
  };
  return def;
}

KernelPair DispatchCpu() {
  KernelPair k;
  k.forward = [](KernelContext& c) -> Status {
    const Tensor x = Flat(*c.inputs[0]);
    if (!c.training) {
      // Token-major: token b's kept choices in its own rows b * S + slot.
      const int64_t slots = c.attrs->GetInt("slots", 1), hidden = x.dim(1);
      Tensor rows = c.outputs[0]->Reshape({x.dim(0) * slots, hidden});
      rows.SetZero();
      for (const MoeChoice& m : MoeKeptChoices(*c.inputs[1], slots)) {
        std::memcpy(rows.data<float>() + m.row * hidden, x.data<float>() + m.token * hidden,
                    static_cast<size_t>(hidden) * sizeof(float));
      }
      return Status::OK();
    }
    const int64_t experts = c.attrs->GetInt("experts", 1);
    EMBER_ASSIGN_OR_RETURN(const int64_t capacity,
                           Capacity(x.dim(0), experts, c.attrs->GetInt("slots", 1),
                                    Flat(*c.inputs[1]).dim(1) / 2, *c.attrs));
    EMBER_ASSIGN_OR_RETURN(const MoeRouting routing,
                           DecodeRouting(*c.inputs[1], experts, capacity, false));
    Tensor buffers = Buffers(*c.outputs[0], experts, capacity);
    EMBER_RETURN_IF_ERROR(MoeDispatch(x, routing, &buffers));
    ZeroPadding(c.outputs[0], experts, capacity);
    return Status::OK();
  };
  k.backward = [](KernelContext& c) -> Status {
    EMBER_RETURN_IF_ERROR(NoBackwardOfInference(c, "moe_dispatch"));
    ZeroIfWanted(c.input_grads[1]);
    if (c.input_grads[0] == nullptr) return Status::OK();
    Tensor dx = Flat(*c.input_grads[0]);
    const int64_t experts = c.attrs->GetInt("experts", 1);
    EMBER_ASSIGN_OR_RETURN(const int64_t capacity,
                           Capacity(dx.dim(0), experts, c.attrs->GetInt("slots", 1),
                                    Flat(*c.inputs[1]).dim(1) / 2, *c.attrs));
    EMBER_ASSIGN_OR_RETURN(const MoeRouting routing,
                           DecodeRouting(*c.inputs[1], experts, capacity, false));
    return MoeDispatchBackward(Buffers(*c.output_grads[0], experts, capacity), routing, &dx);
  };
  return k;
}

// --- moe_combine: expert_out [S, H], gate [k], routing [2, k] -> out [H] ----------

OpDef CombineDef() {
  OpDef def;
  def.name = "moe_combine";
  def.num_inputs = 3;
  def.infer = [](const std::vector<InputShape>& in, const OpAttrs& attrs) -> Result<Shapes> {
    EMBER_RETURN_IF_ERROR(CheckBatched(in, 0, 2, "the experts' outputs"));
    EMBER_RETURN_IF_ERROR(CheckBatched(in, 1, 1, "the gate"));
    EMBER_ASSIGN_OR_RETURN(const int64_t k, RoutingWidth(in, 2));
    EMBER_ASSIGN_OR_RETURN(const int64_t experts, CountAttr(attrs, "experts", 0));
    EMBER_RETURN_IF_ERROR(CheckCapacityFactor(attrs));
    if (in[1].shape[0] != k) {
      return Status::InvalidArgument("the gate has ", in[1].shape[0], " weights, the routing ", k,
                                     " choices");
    }
    if (k > experts) return Status::InvalidArgument("k=", k, " exceeds the ", experts, " experts");
    return Shapes{{in[0].shape[1]}};
  };
  def.rows_grouped = true;  // Capacity and slots per group: ops/op_registry.h.
  def.cost = [](const std::vector<InputShape>& in, const OpAttrs& attrs, int64_t batch,
                bool backward) {
    const int64_t slots = in[0].shape[0], hidden = in[0].shape[1], k = in[1].shape[0];
    const int64_t experts = attrs.GetInt("experts", 1);
    const int64_t capacity = MoeNodeCapacity(batch, experts, slots, k, attrs);
    if (!backward) return MoeCombineCost(batch, k, hidden);
    OpCost cost = MoeCombineBackwardCost(batch, experts, capacity, k, hidden);
    cost.bytes += kF32 * static_cast<double>((batch * slots - experts * capacity) * hidden);
    return cost;
  };
  return def;
}

KernelPair CombineCpu() {
  KernelPair k;
  k.forward = [](KernelContext& c) -> Status {
    const Tensor& expert_out = *c.inputs[0];
    const int64_t experts = c.attrs->GetInt("experts", 1);
    if (!c.training) {
      // Token-major: out_b = sum over b's kept choices j of gate_bj x its row.
      const int64_t slots = expert_out.dim(1), hidden = expert_out.dim(2);
      const Tensor gate = Flat(*c.inputs[1]);
      const int64_t k = gate.dim(1);
      Tensor out = Flat(*c.outputs[0]);
      out.SetZero();
      for (const MoeChoice& m : MoeKeptChoices(*c.inputs[2], slots)) {
        const float g = gate.data<float>()[m.token * k + m.choice];
        const float* y = expert_out.data<float>() + m.row * hidden;
        float* o = out.data<float>() + m.token * hidden;
        for (int64_t h = 0; h < hidden; ++h) o[h] += g * y[h];
      }
      return Status::OK();
    }
    EMBER_ASSIGN_OR_RETURN(const int64_t capacity,
                           Capacity(expert_out.dim(0), experts, expert_out.dim(1),
                                    Flat(*c.inputs[1]).dim(1), *c.attrs));
    EMBER_ASSIGN_OR_RETURN(const MoeRouting routing,
                           DecodeRouting(*c.inputs[2], experts, capacity, false));
    Tensor out = Flat(*c.outputs[0]);
    return MoeCombine(Buffers(expert_out, experts, capacity), Flat(*c.inputs[1]), routing, &out);
  };
  k.backward = [](KernelContext& c) -> Status {
    EMBER_RETURN_IF_ERROR(NoBackwardOfInference(c, "moe_combine"));
    ZeroIfWanted(c.input_grads[2]);
    const Tensor& expert_out = *c.inputs[0];
    const int64_t experts = c.attrs->GetInt("experts", 1);
    EMBER_ASSIGN_OR_RETURN(const int64_t capacity,
                           Capacity(expert_out.dim(0), experts, expert_out.dim(1),
                                    Flat(*c.inputs[1]).dim(1), *c.attrs));
    EMBER_ASSIGN_OR_RETURN(const MoeRouting routing,
                           DecodeRouting(*c.inputs[2], experts, capacity, false));
    Tensor dexpert_out, dgate;
    if (c.input_grads[0] != nullptr) {
      dexpert_out = Buffers(*c.input_grads[0], experts, capacity);
      ZeroPadding(c.input_grads[0], experts, capacity);
    }
    if (c.input_grads[1] != nullptr) dgate = Flat(*c.input_grads[1]);
    return MoeCombineBackward(Buffers(expert_out, experts, capacity), Flat(*c.inputs[1]), routing,
                              Flat(*c.output_grads[0]),
                              c.input_grads[0] != nullptr ? &dexpert_out : nullptr,
                              c.input_grads[1] != nullptr ? &dgate : nullptr);
  };
  return k;
}

}  // namespace

std::vector<MoeChoice> MoeKeptChoices(const Tensor& routing, int64_t slots) {
  const Tensor r = Flat(routing);  // [B, 2k]: experts, then slots.
  const int64_t batch = r.dim(0), k = batch == 0 ? 0 : r.dim(1) / 2;
  const float* in = r.data<float>();
  std::vector<MoeChoice> kept;
  kept.reserve(static_cast<size_t>(batch * k));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t j = 0; j < k; ++j) {
      const float s = in[b * 2 * k + k + j];
      if (!(s >= 0.0f && s < static_cast<float>(slots))) continue;
      kept.push_back({b, j, static_cast<int64_t>(in[b * 2 * k + j]),
                      b * slots + static_cast<int64_t>(s)});
    }
  }
  return kept;
}

int64_t MoeSlotCapacity(int64_t batch, int64_t experts, int64_t slots) {
  return batch * slots / experts;
}

int64_t MoeNodeCapacity(int64_t batch, int64_t experts, int64_t slots, int64_t k,
                        const OpAttrs& attrs) {
  const int64_t by_slots = MoeSlotCapacity(batch, experts, slots);
  const double factor = attrs.Get("capacity_factor", 0.0);
  if (!(factor > 0.0) || !std::isfinite(factor)) return by_slots;
  const double by_factor = std::ceil(factor * static_cast<double>(k * batch) /
                                     static_cast<double>(experts));
  return std::min<int64_t>(by_slots, static_cast<int64_t>(by_factor));
}

Status RegisterMoeRoutingOps(OpRegistry* registry) {
  EMBER_RETURN_IF_ERROR(registry->RegisterOp(RouteDef()));
  EMBER_RETURN_IF_ERROR(registry->RegisterKernel("moe_route", DeviceType::kCpu, RouteCpu()));
  EMBER_RETURN_IF_ERROR(registry->RegisterOp(DispatchDef()));
  EMBER_RETURN_IF_ERROR(registry->RegisterKernel("moe_dispatch", DeviceType::kCpu, DispatchCpu()));
  EMBER_RETURN_IF_ERROR(registry->RegisterOp(CombineDef()));
  EMBER_RETURN_IF_ERROR(registry->RegisterKernel("moe_combine", DeviceType::kCpu, CombineCpu()));
  // The experts and the balance loss that make a layer of the routing.
  return RegisterMoeExpertOps(registry);
}

}  // namespace ember::ops
