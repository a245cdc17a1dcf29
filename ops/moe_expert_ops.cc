// moe_expert_fc and moe_balance (ops/moe_expert_ops.h): shapes, costs and CPU
// kernels; and the statistics of a graph's MoE layers.

#include "ops/moe_expert_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/dense_ops.h"
#include "ops/expert_parallel.h"
#include "ops/kernel_helpers.h"
#include "ops/moe_routing_ops.h"

namespace ember::ops {
namespace {

using Shapes = std::vector<std::vector<int64_t>>;

constexpr double kF32 = 4.0;

// Rows [begin, end) of a 2-D tensor, zeroed.
void ZeroRows(const Tensor& rows, int64_t begin, int64_t end) {
  if (end <= begin) return;
  const int64_t cols = rows.dim(1);
  std::memset(rows.data<float>() + begin * cols, 0,
              static_cast<size_t>((end - begin) * cols) * sizeof(float));
}

// --- moe_expert_fc: buffers [S, in], weight [E, out, in], bias [E, out] -> [S, out]

// The capacity of a batch of `batch` tokens with `slots` buffer rows each.
int64_t ExpertCapacity(int64_t batch, int64_t experts, int64_t slots, const OpAttrs& attrs) {
  return MoeNodeCapacity(batch, experts, slots, attrs.GetInt("k", 1), attrs);
}

OpDef ExpertFcDef() {
  OpDef def;
  def.name = "moe_expert_fc";
  def.num_inputs = -1;  // 3, or 4 with the routing (for inference).
  def.infer = [](const std::vector<InputShape>& in, const OpAttrs& attrs) -> Result<Shapes> {
    if (in.size() != 3 && in.size() != 4) {
      return Status::InvalidArgument("moe_expert_fc takes the buffers, the weight, the bias and "
                                     "optionally the routing, got ", in.size(), " inputs");
    }
    if (in.size() == 4 && (!in[3].batched || in[3].shape.size() != 2 || in[3].shape[0] != 2)) {
      return Status::InvalidArgument("the routing must be a batched [2, k] value (of moe_route)");
    }
    if (!in[0].batched || in[0].shape.size() != 2) {
      return Status::InvalidArgument("the experts' buffers must be a batched [slots, width] value");
    }
    const InputShape& w = in[1];
    const InputShape& b = in[2];
    const int64_t width = in[0].shape[1];
    if (w.batched || w.shape.size() != 3 || w.shape[2] != width) {
      return Status::InvalidArgument("the weight must be an [experts, out, ", width,
                                     "] parameter");
    }
    if (b.batched || b.shape != std::vector<int64_t>{w.shape[0], w.shape[1]}) {
      return Status::InvalidArgument("the bias must be a [", w.shape[0], ", ", w.shape[1],
                                     "] parameter");
    }
    const int64_t act = attrs.GetInt("activation", 0);
    if (act != 0 && act != 1) return Status::InvalidArgument("activation must be 0 or 1");
    const int64_t k = attrs.GetInt("k", 1);
    if (k < 1 || k > w.shape[0]) {
      return Status::InvalidArgument("k=", k, " must be in [1, ", w.shape[0], "] (the experts)");
    }
    const double factor = attrs.Get("capacity_factor", 0.0);
    if (!std::isfinite(factor) || factor < 0.0) {
      return Status::InvalidArgument("capacity_factor=", factor, " must be 0 or finite and > 0");
    }
    return Shapes{{in[0].shape[0], w.shape[1]}};
  };
  def.rows_grouped = true;
  def.cost = [](const std::vector<InputShape>& in, const OpAttrs& attrs, int64_t batch,
                bool backward) {
    const int64_t slots = in[0].shape[0], width = in[0].shape[1];
    const int64_t experts = in[1].shape[0], out = in[1].shape[1];
    const double rows = static_cast<double>(experts * ExpertCapacity(batch, experts, slots, attrs));
    const double k = static_cast<double>(width), n = static_cast<double>(out);
    const double all_rows = static_cast<double>(batch * slots);
    const double params = static_cast<double>(experts) * (k * n + n);
    // As fully_connected on the experts' rows; the padding rows are written
    // (zeros) but not computed.
    OpCost cost;
    cost.flops = backward ? 4 * rows * k * n + rows * n : 2 * rows * k * n + rows * n;
    cost.bytes = kF32 * (backward ? 2 * (all_rows * k + params + all_rows * n)
                                  : all_rows * k + params + all_rows * n);
    return cost;
  };
  return def;
}

Tensor ExpertWeight(const Tensor& weight, int64_t e) {
  return weight.Slice(e, e + 1).Reshape({weight.dim(1), weight.dim(2)});
}

// Each block of x's rows through its expert: y's rows of the block =
// act(x W_e^T + b_e).
Status BlocksForward(const Tensor& x, const std::vector<ExpertBlock>& blocks, const Tensor& weight,
                     const Tensor& bias, Activation activation, ComputePrecision precision,
                     Tensor* y) {
  for (const ExpertBlock& b : blocks) {
    if (b.end <= b.begin) continue;
    Tensor yb = y->Slice(b.begin, b.end);
    EMBER_RETURN_IF_ERROR(FullyConnectedForward(
        x.Slice(b.begin, b.end), ExpertWeight(weight, b.expert),
        bias.Slice(b.expert, b.expert + 1).Reshape({weight.dim(1)}), activation, &yb, precision));
  }
  return Status::OK();
}

// The gradients of BlocksForward: each block's rows of *dx (when defined),
// and the experts' parameter gradients, which an expert's first block writes
// and its later blocks add to, in block order (the order in which a
// graph executor adds its row ranges' gradients); an expert without a block
// gets zeros.
Status BlocksBackward(const Tensor& x, const Tensor& y, const Tensor& dy,
                      const std::vector<ExpertBlock>& blocks, const Tensor& weight,
                      Activation activation, ComputePrecision precision, bool overwrite_dy,
                      Tensor* dx, Tensor* dweight, Tensor* dbias) {
  const int64_t experts = weight.dim(0), out = weight.dim(1), in = weight.dim(2);
  std::vector<char> written(static_cast<size_t>(experts), 0);
  Tensor dw_more, db_more;  // A later block's gradients, added in.
  for (const ExpertBlock& b : blocks) {
    const bool first = !written[b.expert];
    if (!first && b.end <= b.begin) continue;  // Adds zeros.
    Tensor dwe = dweight->Slice(b.expert, b.expert + 1).Reshape({out, in});
    Tensor dbe = dbias->Slice(b.expert, b.expert + 1).Reshape({out});
    if (!first) {
      if (!dw_more.defined()) {
        dw_more = Tensor::Empty({out, in});
        db_more = Tensor::Empty({out});
      }
    }
    Tensor dxb;
    if (dx->defined()) dxb = dx->Slice(b.begin, b.end);
    EMBER_RETURN_IF_ERROR(FullyConnectedBackward(
        x.Slice(b.begin, b.end), ExpertWeight(weight, b.expert), y.Slice(b.begin, b.end),
        dy.Slice(b.begin, b.end), activation, dx->defined() ? &dxb : nullptr,
        first ? &dwe : &dw_more, first ? &dbe : &db_more, precision, {}, overwrite_dy));
    if (!first) {
      float* w = dwe.data<float>();
      const float* more = dw_more.data<float>();
      for (int64_t i = 0; i < out * in; ++i) w[i] += more[i];
      float* bb = dbe.data<float>();
      const float* bmore = db_more.data<float>();
      for (int64_t i = 0; i < out; ++i) bb[i] += bmore[i];
    }
    written[b.expert] = 1;
  }
  for (int64_t e = 0; e < experts; ++e) {
    if (written[e]) continue;
    dweight->Slice(e, e + 1).SetZero();
    dbias->Slice(e, e + 1).SetZero();
  }
  return Status::OK();
}

// Inference (moe_routing_ops.h): the token-major rows of each expert,
// gathered, through the expert, and scattered back; the other rows zero.
Status ExpertFcForInference(const KernelContext& c, const ExpertLayout& v, const Tensor& x,
                            Tensor* y) {
  if (c.inputs.size() < 4) {
    return Status::FailedPrecondition(
        "moe_expert_fc: an inference forward needs the routing (the op's 4th input)");
  }
  const int64_t batch = c.inputs[0]->dim(0);
  const int64_t slots = batch == 0 ? 0 : v.rows / batch;
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(v.experts));
  for (const MoeChoice& m : MoeKeptChoices(*c.inputs[3], slots)) {
    if (m.expert < 0 || m.expert >= v.experts) {
      return Status::InvalidArgument("moe_expert_fc: routing names expert ", m.expert, " of ",
                                     v.experts);
    }
    rows[static_cast<size_t>(m.expert)].push_back(m.row);
  }
  y->SetZero();
  for (int64_t e = 0; e < v.experts; ++e) {
    const std::vector<int64_t>& mine = rows[static_cast<size_t>(e)];
    if (mine.empty()) continue;
    const int64_t n = static_cast<int64_t>(mine.size());
    Tensor in = Tensor::Empty({n, v.in}), out = Tensor::Empty({n, v.out});
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(in.data<float>() + i * v.in, x.data<float>() + mine[i] * v.in,
                  static_cast<size_t>(v.in) * sizeof(float));
    }
    EMBER_RETURN_IF_ERROR(BlocksForward(in, {{e, 0, n}}, *c.inputs[1], *c.inputs[2], v.activation,
                                        c.precision, &out));
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(y->data<float>() + mine[i] * v.out, out.data<float>() + i * v.out,
                  static_cast<size_t>(v.out) * sizeof(float));
    }
  }
  return Status::OK();
}

KernelPair ExpertFcCpu() {
  KernelPair k;
  k.forward = [](KernelContext& c) -> Status {
    const ExpertLayout v = ExpertLayoutOf(c);
    const Tensor x = c.inputs[0]->Reshape({v.rows, v.in});
    Tensor y = c.outputs[0]->Reshape({v.rows, v.out});
    const Tensor& weight = *c.inputs[1];
    const Tensor& bias = *c.inputs[2];
    if (!c.training) return ExpertFcForInference(c, v, x, &y);
    if (c.experts != nullptr) {
      // Expert parallelism: the rows go to their experts' ranks and back.
      std::vector<ExpertBlock> blocks;
      EMBER_ASSIGN_OR_RETURN(Tensor received, c.experts->Dispatch(c.node, x, v.experts, v.capacity,
                                                                  /*backward=*/false, &blocks));
      Tensor computed = Tensor::Empty({received.dim(0), v.out});
      EMBER_RETURN_IF_ERROR(
          BlocksForward(received, blocks, weight, bias, v.activation, c.precision, &computed));
      EMBER_RETURN_IF_ERROR(c.experts->Combine(c.node, computed, /*backward=*/false, &y));
      c.experts->kept(c.node) = {received, computed};
    } else {
      EMBER_RETURN_IF_ERROR(BlocksForward(x, LocalExpertBlocks(v.experts, v.capacity), weight, bias,
                                          v.activation, c.precision, &y));
    }
    ZeroRows(y, v.experts * v.capacity, v.rows);
    return Status::OK();
  };
  k.backward = [](KernelContext& c) -> Status {
    if (!c.training) {
      return Status::FailedPrecondition("moe_expert_fc: no backward of an inference forward");
    }
    const ExpertLayout v = ExpertLayoutOf(c);
    const Tensor x = c.inputs[0]->Reshape({v.rows, v.in});
    const Tensor y = c.outputs[0]->Reshape({v.rows, v.out});
    const Tensor dy = c.output_grads[0]->Reshape({v.rows, v.out});
    const Tensor& weight = *c.inputs[1];
    // The parameters' gradients are wanted in every graph that trains them;
    // scratch stands in for one that is not.
    Tensor dweight = c.input_grads[1] != nullptr ? *c.input_grads[1] : Tensor::Empty(weight.shape());
    Tensor dbias =
        c.input_grads[2] != nullptr ? *c.input_grads[2] : Tensor::Empty(c.inputs[2]->shape());
    Tensor dx;
    if (c.input_grads[0] != nullptr) dx = c.input_grads[0]->Reshape({v.rows, v.in});
    if (c.experts != nullptr) {
      std::vector<ExpertBlock> blocks;
      EMBER_ASSIGN_OR_RETURN(Tensor received_dy,
                             c.experts->Dispatch(c.node, dy, v.experts, v.capacity,
                                                 /*backward=*/true, &blocks));
      const std::vector<Tensor> kept = c.experts->kept(c.node);
      if (kept.size() != 2) {
        return Status::FailedPrecondition("the backward of an expert layer without its forward");
      }
      Tensor received_dx;
      if (dx.defined()) received_dx = Tensor::Empty({kept[0].dim(0), v.in});
      EMBER_RETURN_IF_ERROR(BlocksBackward(kept[0], kept[1], received_dy, blocks, weight,
                                           v.activation, c.precision, /*overwrite_dy=*/true,
                                           &received_dx, &dweight, &dbias));
      if (dx.defined()) {
        EMBER_RETURN_IF_ERROR(c.experts->Combine(c.node, received_dx, /*backward=*/true, &dx));
      }
      c.experts->kept(c.node).clear();
    } else {
      EMBER_RETURN_IF_ERROR(BlocksBackward(x, y, dy, LocalExpertBlocks(v.experts, v.capacity),
                                           weight, v.activation, c.precision,
                                           c.output_grads_disposable, &dx, &dweight, &dbias));
    }
    if (dx.defined()) ZeroRows(dx, v.experts * v.capacity, v.rows);
    return Status::OK();
  };
  return k;
}

// --- moe_balance: probs [E] -> probs [E], aux share [1] ------------------------------

// f[e]: the fraction of the batch's rows whose largest probability is e's.
std::vector<double> TopOneFractions(const Tensor& probs) {
  const int64_t batch = probs.dim(0), experts = probs.dim(1);
  std::vector<double> f(experts, 0.0);
  const float* p = probs.data<float>();
  for (int64_t b = 0; b < batch; ++b) {
    int64_t best = 0;
    for (int64_t e = 1; e < experts; ++e) {
      if (p[b * experts + e] > p[b * experts + best]) best = e;
    }
    f[best] += 1.0;
  }
  for (double& x : f) x /= static_cast<double>(batch);
  return f;
}

OpDef BalanceDef() {
  OpDef def;
  def.name = "moe_balance";
  def.num_inputs = 1;
  def.infer = [](const std::vector<InputShape>& in, const OpAttrs& attrs) -> Result<Shapes> {
    if (!in[0].batched || in[0].shape.size() != 1 || in[0].shape[0] < 1) {
      return Status::InvalidArgument("the gate's probabilities must be a batched [experts] value");
    }
    const double weight = attrs.Get("weight", 0.0);
    if (!std::isfinite(weight) || weight < 0.0) {
      return Status::InvalidArgument("the auxiliary loss weight ", weight,
                                     " must be finite and >= 0");
    }
    return Shapes{{in[0].shape[0]}, {1}};
  };
  def.rows_grouped = true;
  def.cost = [](const std::vector<InputShape>& in, const OpAttrs&, int64_t batch, bool backward) {
    const double n = static_cast<double>(batch * in[0].shape[0]);
    // Forward: the copy, the argmax (compares) and a multiply-add per
    // element for the shares; backward: an add per element.
    OpCost cost;
    cost.flops = backward ? n : 2 * n;
    cost.bytes = kF32 * (backward ? 2 * n + n : 2 * n + static_cast<double>(batch));
    return cost;
  };
  return def;
}

// The examples the objective's mean runs over (KernelContext::loss_examples),
// at least this batch.
int64_t LossExamples(const KernelContext& c, int64_t batch) {
  return std::max(c.loss_examples, batch);
}

KernelPair BalanceCpu() {
  KernelPair k;
  k.forward = [](KernelContext& c) -> Status {
    const Tensor probs = Flat(*c.inputs[0]);
    const int64_t batch = probs.dim(0), experts = probs.dim(1);
    std::memcpy(c.outputs[0]->raw_data(), probs.raw_data(), probs.nbytes());
    if (batch == 0) return Status::OK();
    const std::vector<double> f = TopOneFractions(probs);
    const float* p = probs.data<float>();
    float* share = c.outputs[1]->data<float>();
    const double scale = static_cast<double>(experts) / static_cast<double>(LossExamples(c, batch));
    for (int64_t b = 0; b < batch; ++b) {
      double sum = 0.0;
      for (int64_t e = 0; e < experts; ++e) sum += f[e] * p[b * experts + e];
      share[b] = static_cast<float>(scale * sum);
    }
    return Status::OK();
  };
  k.backward = [](KernelContext& c) -> Status {
    if (c.input_grads[0] == nullptr) return Status::OK();
    const Tensor probs = Flat(*c.inputs[0]);
    const int64_t batch = probs.dim(0), experts = probs.dim(1);
    const Tensor dout = Flat(*c.output_grads[0]);
    Tensor dprobs = Flat(*c.input_grads[0]);
    std::memcpy(dprobs.raw_data(), dout.raw_data(), dout.nbytes());
    const double weight = c.attrs->Get("weight", 0.0);
    if (batch == 0 || weight == 0.0) return Status::OK();
    const std::vector<double> f = TopOneFractions(probs);
    std::vector<float> add(experts);
    for (int64_t e = 0; e < experts; ++e) {
      add[e] = static_cast<float>(weight * static_cast<double>(experts) * f[e] /
                                  static_cast<double>(LossExamples(c, batch)));
    }
    float* d = dprobs.data<float>();
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t e = 0; e < experts; ++e) d[b * experts + e] += add[e];
    }
    return Status::OK();
  };
  return k;
}

}  // namespace

ExpertLayout ExpertLayoutOf(const KernelContext& c) {
  ExpertLayout v;
  const Tensor& buffers = *c.inputs[0];
  v.experts = c.inputs[1]->dim(0);
  v.out = c.inputs[1]->dim(1);
  v.in = c.inputs[1]->dim(2);
  const int64_t batch = buffers.dim(0);
  const int64_t slots = batch == 0 ? 0 : buffers.numel() / (batch * v.in);
  v.rows = batch * slots;
  v.capacity = batch == 0 ? 0 : ExpertCapacity(batch, v.experts, slots, *c.attrs);
  v.activation = c.attrs->GetInt("activation", 0) == 1 ? Activation::kRelu : Activation::kNone;
  return v;
}

Status RegisterMoeExpertOps(OpRegistry* registry) {
  EMBER_RETURN_IF_ERROR(registry->RegisterOp(ExpertFcDef()));
  EMBER_RETURN_IF_ERROR(
      registry->RegisterKernel("moe_expert_fc", DeviceType::kCpu, ExpertFcCpu()));
  EMBER_RETURN_IF_ERROR(registry->RegisterOp(BalanceDef()));
  EMBER_RETURN_IF_ERROR(registry->RegisterKernel("moe_balance", DeviceType::kCpu, BalanceCpu()));
  return Status::OK();
}

MoeStepStats CollectMoeStats(const Graph& graph,
                             const std::function<const Tensor*(int value_id)>& value) {
  MoeStepStats stats;
  for (const GraphNode& node : graph.nodes()) {
    if (node.op == "moe_route") {
      ++stats.layers;
      const Tensor* routing = value(node.outputs[1]);
      if (routing == nullptr || routing->dim(0) == 0) continue;
      const Tensor flat = Flat(*routing);  // [B, 2k]: experts, then slots.
      const int64_t batch = flat.dim(0), k = flat.dim(1) / 2;
      const float* r = flat.data<float>();
      stats.choices += batch * k;
      for (int64_t b = 0; b < batch; ++b) {
        int64_t dropped = 0;
        for (int64_t j = 0; j < k; ++j) dropped += r[b * 2 * k + k + j] < 0.0f;
        stats.dropped_choices += dropped;
        stats.dropped_examples += dropped > 0;
      }
    } else if (node.op == "moe_balance") {
      const Tensor* share = value(node.outputs[1]);
      if (share == nullptr) continue;
      const float* s = share->data<float>();
      for (int64_t b = 0; b < share->numel(); ++b) stats.aux_loss += s[b];
    }
  }
  return stats;
}

}  // namespace ember::ops
