// Softmax gate, top-k routing with expert capacity, and dispatch/combine for
// mixture-of-experts layers (GShard, Lepikhin et al. 2020; Switch Transformer,
// Fedus et al. 2021).

#include "ops/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/threads.h"
#include "ops/internal/tensor_checks.h"

namespace ember::ops {
namespace {

// Rows per parallel chunk so that a chunk touches about this many elements.
constexpr int64_t kWorkPerChunk = 1 << 15;

int64_t RowGrain(int64_t row_elements) {
  return std::max<int64_t>(1, kWorkPerChunk / std::max<int64_t>(1, row_elements));
}

// The routing's index tensors: i32 [B, k] each, experts in [0, E), slots in
// [-1, capacity). Sets *batch and *k.
Status CheckRoutingIndices(const char* op, const MoeRouting& routing, int64_t* batch, int64_t* k) {
  if (routing.num_experts < 1 || routing.capacity < 0) {
    return Status::InvalidArgument(op, ": routing has num_experts = ", routing.num_experts,
                                   " and capacity = ", routing.capacity,
                                   "; expected >= 1 and >= 0");
  }
  EMBER_RETURN_IF_ERROR(CheckRank(op, "routing.expert", routing.expert, DType::kI32, 2));
  EMBER_RETURN_IF_ERROR(
      CheckTensor(op, "routing.slot", routing.slot, DType::kI32, routing.expert.shape()));
  *batch = routing.expert.dim(0);
  *k = routing.expert.dim(1);
  const int32_t* expert = routing.expert.data<int32_t>();
  const int32_t* slot = routing.slot.data<int32_t>();
  for (int64_t i = 0; i < *batch * *k; ++i) {
    if (expert[i] < 0 || expert[i] >= routing.num_experts) {
      return Status::InvalidArgument(op, ": routing.expert[", i / *k, ", ", i % *k,
                                     "] = ", expert[i], " is outside [0, ", routing.num_experts,
                                     ")");
    }
    if (slot[i] < -1 || slot[i] >= routing.capacity) {
      return Status::InvalidArgument(op, ": routing.slot[", i / *k, ", ", i % *k, "] = ", slot[i],
                                     " is outside [-1, ", routing.capacity, ")");
    }
  }
  return Status::OK();
}

// For every buffer row (expert * capacity + slot), the choice b * k + j that
// claims it, or -1. Fails if two choices claim the same row.
// REQUIRES: CheckRoutingIndices passed.
Result<std::vector<int64_t>> SlotOwners(const char* op, const MoeRouting& routing, int64_t batch,
                                        int64_t k) {
  std::vector<int64_t> owners(static_cast<size_t>(routing.num_experts * routing.capacity), -1);
  const int32_t* expert = routing.expert.data<int32_t>();
  const int32_t* slot = routing.slot.data<int32_t>();
  for (int64_t i = 0; i < batch * k; ++i) {
    if (slot[i] < 0) continue;
    int64_t& owner = owners[static_cast<size_t>(expert[i] * routing.capacity + slot[i])];
    if (owner >= 0) {
      return Status::InvalidArgument(op, ": routing sends choices [", owner / k, ", ", owner % k,
                                     "] and [", i / k, ", ", i % k, "] to slot ", slot[i],
                                     " of expert ", expert[i]);
    }
    owner = i;
  }
  return owners;
}

// Indices of the k largest of p[0, E), largest first, ties to the lower index.
void TopK(const float* p, int64_t experts, int64_t k, std::vector<int32_t>* order) {
  order->resize(static_cast<size_t>(experts));
  std::iota(order->begin(), order->end(), 0);
  std::partial_sort(order->begin(), order->begin() + k, order->end(),
                    [p](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
}

Status CheckProbs(const char* op, const Tensor& probs) {
  const float* p = probs.data<float>();
  const int64_t experts = probs.dim(1);
  for (int64_t i = 0; i < probs.numel(); ++i) {
    if (!(p[i] >= 0.0f) || !std::isfinite(p[i])) {
      return Status::InvalidArgument(op, ": probs[", i / experts, ", ", i % experts, "] = ", p[i],
                                     " is not a finite non-negative probability");
    }
  }
  return Status::OK();
}

// The k top experts and gate weights of every token; slots are left unset.
Status SelectExperts(const Tensor& probs, const MoeRoutingOptions& options, MoeRouting* routing) {
  const int64_t batch = probs.dim(0), experts = probs.dim(1), k = options.k;
  const float* p = probs.data<float>();
  int32_t* expert = routing->expert.data<int32_t>();
  float* gate = routing->gate.data<float>();
  for (int64_t b = 0; b < batch && options.normalize_gates; ++b) {
    // Checked up front so that the parallel loop below cannot fail. The
    // probabilities are non-negative, so the top k sum to 0 only when all do.
    const float* row = p + b * experts;
    if (*std::max_element(row, row + experts) <= 0.0f) {
      return Status::InvalidArgument("RouteTopK: the top-", k, " probabilities of token ", b,
                                     " sum to 0 and cannot be normalised");
    }
  }
  ParallelFor(0, batch, RowGrain(experts), [&](int64_t begin, int64_t end) {
    std::vector<int32_t> order;
    for (int64_t b = begin; b < end; ++b) {
      const float* row = p + b * experts;
      TopK(row, experts, k, &order);
      double sum = 0.0;
      for (int64_t j = 0; j < k; ++j) sum += row[order[j]];
      const double scale = options.normalize_gates ? 1.0 / sum : 1.0;
      for (int64_t j = 0; j < k; ++j) {
        expert[b * k + j] = order[j];
        gate[b * k + j] = static_cast<float>(row[order[j]] * scale);
      }
    }
  });
  return Status::OK();
}

// out[b, :] = sum over token b's kept choices i of weights[i] (1 when
// null) times the expert row its (expert, slot) names in src[E, C, H].
void GatherSlots(const MoeRouting& routing, const float* src, const float* weights,
                 int64_t batch, int64_t k, int64_t hidden, float* out) {
  const int32_t* expert = routing.expert.data<int32_t>();
  const int32_t* slot = routing.slot.data<int32_t>();
  ParallelFor(0, batch, RowGrain(k * hidden), [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      float* row = out + b * hidden;
      std::memset(row, 0, static_cast<size_t>(hidden) * sizeof(float));
      for (int64_t j = 0; j < k; ++j) {
        const int64_t i = b * k + j;
        if (slot[i] < 0) continue;
        const float* y = src + (expert[i] * routing.capacity + slot[i]) * hidden;
        const float w = weights != nullptr ? weights[i] : 1.0f;
        for (int64_t h = 0; h < hidden; ++h) row[h] += w * y[h];
      }
    }
  });
}

}  // namespace

Status SoftmaxForward(const Tensor& logits, Tensor* probs) {
  constexpr const char* kOp = "SoftmaxForward";
  EMBER_RETURN_IF_ERROR(CheckRank(kOp, "logits", logits, DType::kF32, 2));
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "probs", probs, DType::kF32, logits.shape()));
  const int64_t batch = logits.dim(0), experts = logits.dim(1);
  const float* z = logits.data<float>();
  float* p = probs->data<float>();
  ParallelFor(0, batch, RowGrain(experts), [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const float* zr = z + b * experts;
      float* pr = p + b * experts;
      float max = -INFINITY;
      for (int64_t e = 0; e < experts; ++e) max = std::max(max, zr[e]);
      double sum = 0.0;
      for (int64_t e = 0; e < experts; ++e) {
        pr[e] = std::exp(zr[e] - max);
        sum += pr[e];
      }
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t e = 0; e < experts; ++e) pr[e] *= inv;
    }
  });
  return Status::OK();
}

Status SoftmaxBackward(const Tensor& probs, const Tensor& dprobs, Tensor* dlogits) {
  constexpr const char* kOp = "SoftmaxBackward";
  EMBER_RETURN_IF_ERROR(CheckRank(kOp, "probs", probs, DType::kF32, 2));
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "dprobs", dprobs, DType::kF32, probs.shape()));
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "dlogits", dlogits, DType::kF32, probs.shape()));
  const int64_t batch = probs.dim(0), experts = probs.dim(1);
  const float* p = probs.data<float>();
  const float* dp = dprobs.data<float>();
  float* dz = dlogits->data<float>();
  ParallelFor(0, batch, RowGrain(experts), [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const int64_t row = b * experts;
      double dot = 0.0;
      for (int64_t e = 0; e < experts; ++e) dot += static_cast<double>(dp[row + e]) * p[row + e];
      const float dotf = static_cast<float>(dot);
      for (int64_t e = 0; e < experts; ++e) dz[row + e] = p[row + e] * (dp[row + e] - dotf);
    }
  });
  return Status::OK();
}

Result<int64_t> MoeCapacity(int64_t num_tokens, int64_t num_experts, int k,
                            double capacity_factor) {
  if (num_tokens < 0) return Status::InvalidArgument("MoeCapacity: num_tokens = ", num_tokens);
  if (num_experts < 1) {
    return Status::InvalidArgument("MoeCapacity: num_experts = ", num_experts, "; expected >= 1");
  }
  if (k < 1 || k > num_experts) {
    return Status::InvalidArgument("MoeCapacity: k = ", k, " is outside [1, ", num_experts, "]");
  }
  if (!(capacity_factor > 0.0) || !std::isfinite(capacity_factor)) {
    return Status::InvalidArgument("MoeCapacity: capacity_factor = ", capacity_factor,
                                   "; expected finite and > 0");
  }
  const double slots = std::ceil(capacity_factor * k * static_cast<double>(num_tokens) /
                                 static_cast<double>(num_experts));
  if (slots > static_cast<double>(int64_t{1} << 40)) {
    return Status::InvalidArgument("MoeCapacity: capacity_factor = ", capacity_factor, " gives ",
                                   slots, " slots per expert");
  }
  return static_cast<int64_t>(slots);
}

Result<int64_t> MoeRoutingCapacity(int64_t num_tokens, int64_t num_experts,
                                   const MoeRoutingOptions& options) {
  // MoeCapacity checks k and the counts also when options.capacity is used.
  EMBER_ASSIGN_OR_RETURN(const int64_t capacity,
                         MoeCapacity(num_tokens, num_experts, options.k,
                                     options.capacity < 0 ? options.capacity_factor : 1.0));
  return options.capacity < 0 ? capacity : options.capacity;
}

Result<MoeRouting> RouteTopK(const Tensor& probs, const MoeRoutingOptions& options) {
  constexpr const char* kOp = "RouteTopK";
  EMBER_RETURN_IF_ERROR(CheckRank(kOp, "probs", probs, DType::kF32, 2));
  const int64_t batch = probs.dim(0), experts = probs.dim(1), k = options.k;
  if (experts < 1) {
    return Status::InvalidArgument(kOp, ": probs must have at least one expert, got ",
                                   probs.DebugString());
  }
  Result<int64_t> capacity_or = MoeRoutingCapacity(batch, experts, options);
  if (!capacity_or.ok()) return capacity_or.status().WithContext(kOp);
  const int64_t capacity = *capacity_or;
  EMBER_RETURN_IF_ERROR(CheckProbs(kOp, probs));
  MoeRouting routing;
  routing.num_experts = experts;
  routing.capacity = capacity;
  routing.normalize_gates = options.normalize_gates;
  routing.expert = Tensor::Empty({batch, k}, DType::kI32);
  routing.slot = Tensor::Empty({batch, k}, DType::kI32);
  routing.gate = Tensor::Empty({batch, k});
  EMBER_RETURN_IF_ERROR(SelectExperts(probs, options, &routing));
  // Slots are claimed in token order, hence sequentially: the fill level of
  // each expert depends on every earlier token.
  std::vector<int64_t> fill(static_cast<size_t>(experts), 0);
  const int32_t* expert = routing.expert.data<int32_t>();
  int32_t* slot = routing.slot.data<int32_t>();
  float* gate = routing.gate.data<float>();
  for (int64_t i = 0; i < batch * k; ++i) {
    int64_t& level = fill[static_cast<size_t>(expert[i])];
    if (level < capacity) {
      slot[i] = static_cast<int32_t>(level++);
    } else {
      slot[i] = -1;
      gate[i] = 0.0f;
      ++routing.num_dropped;
    }
  }
  return routing;
}

Status MoeGateBackward(const Tensor& probs, const MoeRouting& routing, const Tensor& dgate,
                       Tensor* dprobs) {
  constexpr const char* kOp = "MoeGateBackward";
  int64_t batch = 0, k = 0;
  EMBER_RETURN_IF_ERROR(CheckRoutingIndices(kOp, routing, &batch, &k));
  const int64_t experts = routing.num_experts;
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "probs", probs, DType::kF32, {batch, experts}));
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "dgate", dgate, DType::kF32, {batch, k}));
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "dprobs", dprobs, DType::kF32, {batch, experts}));
  const float* p = probs.data<float>();
  const int32_t* expert = routing.expert.data<int32_t>();
  const int32_t* slot = routing.slot.data<int32_t>();
  const float* dg = dgate.data<float>();
  float* dp = dprobs->data<float>();
  ParallelFor(0, batch, RowGrain(experts), [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const float* pr = p + b * experts;
      float* dpr = dp + b * experts;
      std::memset(dpr, 0, static_cast<size_t>(experts) * sizeof(float));
      const int64_t base = b * k;
      if (!routing.normalize_gates) {
        for (int64_t j = 0; j < k; ++j) {
          if (slot[base + j] >= 0) dpr[expert[base + j]] = dg[base + j];
        }
        continue;
      }
      // gate_j = p_j / S with S the sum over all k choices, so
      // d gate_j / d p_i = ([i == j] - p_j / S) / S, summed over kept j.
      double sum = 0.0;
      for (int64_t j = 0; j < k; ++j) sum += pr[expert[base + j]];
      if (!(sum > 0.0)) continue;  // no gradient where the forward had none
      double dot = 0.0;
      for (int64_t j = 0; j < k; ++j) {
        if (slot[base + j] >= 0) dot += static_cast<double>(dg[base + j]) * pr[expert[base + j]];
      }
      dot /= sum;
      for (int64_t j = 0; j < k; ++j) {
        const double own = slot[base + j] >= 0 ? dg[base + j] : 0.0;
        dpr[expert[base + j]] = static_cast<float>((own - dot) / sum);
      }
    }
  });
  return Status::OK();
}

Status MoeDispatch(const Tensor& x, const MoeRouting& routing, Tensor* buffers) {
  constexpr const char* kOp = "MoeDispatch";
  int64_t batch = 0, k = 0;
  EMBER_RETURN_IF_ERROR(CheckRoutingIndices(kOp, routing, &batch, &k));
  EMBER_RETURN_IF_ERROR(CheckRank(kOp, "x", x, DType::kF32, 2));
  const int64_t hidden = x.dim(1);
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "x", x, DType::kF32, {batch, hidden}));
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "buffers", buffers, DType::kF32,
                                    {routing.num_experts, routing.capacity, hidden}));
  EMBER_ASSIGN_OR_RETURN(const std::vector<int64_t> owners, SlotOwners(kOp, routing, batch, k));
  if (hidden == 0) return Status::OK();
  const float* src = x.data<float>();
  float* dst = buffers->data<float>();
  const size_t row_bytes = static_cast<size_t>(hidden) * sizeof(float);
  // One pass over the buffer rows: each is either a token's copy or padding.
  ParallelFor(0, static_cast<int64_t>(owners.size()), RowGrain(hidden),
              [&](int64_t begin, int64_t end) {
                for (int64_t r = begin; r < end; ++r) {
                  const int64_t owner = owners[static_cast<size_t>(r)];
                  if (owner < 0) {
                    std::memset(dst + r * hidden, 0, row_bytes);
                  } else {
                    std::memcpy(dst + r * hidden, src + (owner / k) * hidden, row_bytes);
                  }
                }
              });
  return Status::OK();
}

Status MoeDispatchBackward(const Tensor& dbuffers, const MoeRouting& routing, Tensor* dx) {
  constexpr const char* kOp = "MoeDispatchBackward";
  int64_t batch = 0, k = 0;
  EMBER_RETURN_IF_ERROR(CheckRoutingIndices(kOp, routing, &batch, &k));
  EMBER_RETURN_IF_ERROR(CheckRank(kOp, "dbuffers", dbuffers, DType::kF32, 3));
  const int64_t hidden = dbuffers.dim(2);
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "dbuffers", dbuffers, DType::kF32,
                                    {routing.num_experts, routing.capacity, hidden}));
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "dx", dx, DType::kF32, {batch, hidden}));
  GatherSlots(routing, dbuffers.data<float>(), /*weights=*/nullptr, batch, k, hidden,
              dx->data<float>());
  return Status::OK();
}

Status MoeCombine(const Tensor& expert_out, const Tensor& gate, const MoeRouting& routing,
                  Tensor* out) {
  constexpr const char* kOp = "MoeCombine";
  int64_t batch = 0, k = 0;
  EMBER_RETURN_IF_ERROR(CheckRoutingIndices(kOp, routing, &batch, &k));
  EMBER_RETURN_IF_ERROR(CheckRank(kOp, "expert_out", expert_out, DType::kF32, 3));
  const int64_t hidden = expert_out.dim(2);
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "expert_out", expert_out, DType::kF32,
                                    {routing.num_experts, routing.capacity, hidden}));
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "gate", gate, DType::kF32, {batch, k}));
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "out", out, DType::kF32, {batch, hidden}));
  GatherSlots(routing, expert_out.data<float>(), gate.data<float>(), batch, k, hidden,
              out->data<float>());
  return Status::OK();
}

Status MoeCombineBackward(const Tensor& expert_out, const Tensor& gate, const MoeRouting& routing,
                          const Tensor& dout, Tensor* dexpert_out, Tensor* dgate) {
  constexpr const char* kOp = "MoeCombineBackward";
  int64_t batch = 0, k = 0;
  EMBER_RETURN_IF_ERROR(CheckRoutingIndices(kOp, routing, &batch, &k));
  EMBER_RETURN_IF_ERROR(CheckRank(kOp, "expert_out", expert_out, DType::kF32, 3));
  const int64_t hidden = expert_out.dim(2);
  const std::vector<int64_t> buffer_shape = {routing.num_experts, routing.capacity, hidden};
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "expert_out", expert_out, DType::kF32, buffer_shape));
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "gate", gate, DType::kF32, {batch, k}));
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "dout", dout, DType::kF32, {batch, hidden}));
  if (dexpert_out != nullptr) {
    EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "dexpert_out", dexpert_out, DType::kF32, buffer_shape));
  }
  if (dgate != nullptr) {
    EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "dgate", dgate, DType::kF32, {batch, k}));
  }
  std::vector<int64_t> owners;
  if (dexpert_out != nullptr && hidden > 0) {
    EMBER_ASSIGN_OR_RETURN(owners, SlotOwners(kOp, routing, batch, k));
  }
  const int32_t* expert = routing.expert.data<int32_t>();
  const int32_t* slot = routing.slot.data<int32_t>();
  const float* g = gate.data<float>();
  const float* y = expert_out.data<float>();
  const float* dy = dout.data<float>();
  if (dgate != nullptr) {
    float* dg = dgate->data<float>();
    ParallelFor(0, batch, RowGrain(k * hidden), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin * k; i < end * k; ++i) {
        double dot = 0.0;
        if (slot[i] >= 0) {
          const float* yr = y + (expert[i] * routing.capacity + slot[i]) * hidden;
          const float* dyr = dy + (i / k) * hidden;
          for (int64_t h = 0; h < hidden; ++h) dot += static_cast<double>(dyr[h]) * yr[h];
        }
        dg[i] = static_cast<float>(dot);
      }
    });
  }
  if (dexpert_out == nullptr || hidden == 0) return Status::OK();
  float* dyo = dexpert_out->data<float>();
  ParallelFor(0, static_cast<int64_t>(owners.size()), RowGrain(hidden),
              [&](int64_t begin, int64_t end) {
                for (int64_t r = begin; r < end; ++r) {
                  const int64_t owner = owners[static_cast<size_t>(r)];
                  float* row = dyo + r * hidden;
                  if (owner < 0) {
                    std::memset(row, 0, static_cast<size_t>(hidden) * sizeof(float));
                    continue;
                  }
                  const float* dyr = dy + (owner / k) * hidden;
                  for (int64_t h = 0; h < hidden; ++h) row[h] = g[owner] * dyr[h];
                }
              });
  return Status::OK();
}

OpCost SoftmaxForwardCost(int64_t batch, int64_t experts) {
  const double n = static_cast<double>(batch) * static_cast<double>(experts);
  return {4.0 * n, 8.0 * n};
}

OpCost SoftmaxBackwardCost(int64_t batch, int64_t experts) {
  const double n = static_cast<double>(batch) * static_cast<double>(experts);
  return {4.0 * n, 12.0 * n};
}

OpCost RouteTopKCost(int64_t batch, int64_t experts, int64_t k, bool normalize_gates) {
  const double b = static_cast<double>(batch);
  const double bk = b * static_cast<double>(k);
  return {(normalize_gates ? 2.0 : 0.0) * bk, 4.0 * b * static_cast<double>(experts) + 12.0 * bk};
}

OpCost MoeGateBackwardCost(int64_t batch, int64_t experts, int64_t k, bool normalize_gates) {
  const double b = static_cast<double>(batch);
  const double bk = b * static_cast<double>(k);
  return {(normalize_gates ? 4.0 : 0.0) * bk,
          4.0 * b * static_cast<double>(experts) + 4.0 * bk * (normalize_gates ? 4.0 : 3.0)};
}

OpCost MoeDispatchCost(int64_t batch, int64_t experts, int64_t capacity, int64_t k,
                       int64_t hidden) {
  const double b = static_cast<double>(batch), h = static_cast<double>(hidden);
  const double slots = static_cast<double>(experts) * static_cast<double>(capacity);
  return {0.0, 4.0 * b * h + 4.0 * slots * h + 8.0 * b * static_cast<double>(k)};
}

OpCost MoeDispatchBackwardCost(int64_t batch, int64_t k, int64_t hidden) {
  const double bk = static_cast<double>(batch) * static_cast<double>(k);
  const double h = static_cast<double>(hidden);
  return {bk * h, 4.0 * bk * h + 4.0 * static_cast<double>(batch) * h + 8.0 * bk};
}

OpCost MoeCombineCost(int64_t batch, int64_t k, int64_t hidden) {
  const double bk = static_cast<double>(batch) * static_cast<double>(k);
  const double h = static_cast<double>(hidden);
  return {2.0 * bk * h, 4.0 * bk * h + 4.0 * static_cast<double>(batch) * h + 12.0 * bk};
}

OpCost MoeCombineBackwardCost(int64_t batch, int64_t experts, int64_t capacity, int64_t k,
                              int64_t hidden) {
  const double b = static_cast<double>(batch), h = static_cast<double>(hidden);
  const double bk = b * static_cast<double>(k);
  const double slots = static_cast<double>(experts) * static_cast<double>(capacity);
  return {3.0 * bk * h, 4.0 * b * h + 4.0 * bk * h + 4.0 * slots * h + 16.0 * bk};
}

namespace {

// Checks gate[B, E] and experts[B, E * H] or [B, E, H]; sets *hidden.
Status CheckMixture(const char* op, const Tensor& gate, const Tensor& experts, int64_t* hidden) {
  EMBER_RETURN_IF_ERROR(CheckRank(op, "gate", gate, DType::kF32, 2));
  const int64_t batch = gate.dim(0);
  const int64_t num_experts = gate.dim(1);
  if (num_experts < 1) return Status::InvalidArgument(op, ": gate has no experts");
  if (!experts.defined() || experts.dtype() != DType::kF32 || !experts.device().is_cpu() ||
      (experts.ndim() != 2 && experts.ndim() != 3) || experts.dim(0) != batch ||
      (experts.ndim() == 3 && experts.dim(1) != num_experts) ||
      (experts.ndim() == 2 && experts.dim(1) % num_experts != 0)) {
    return Status::InvalidArgument(op, ": experts must be f32[", batch, ", ", num_experts,
                                   ", H] or [", batch, ", ", num_experts,
                                   " * H] on cpu for gate ", gate.DebugString(), ", got ",
                                   experts.DebugString());
  }
  *hidden = experts.ndim() == 3 ? experts.dim(2) : experts.dim(1) / num_experts;
  return Status::OK();
}

}  // namespace

Status MixtureForward(const Tensor& gate, const Tensor& experts, Tensor* out) {
  int64_t hidden = 0;
  EMBER_RETURN_IF_ERROR(CheckMixture("MixtureForward", gate, experts, &hidden));
  const int64_t batch = gate.dim(0);
  const int64_t num_experts = gate.dim(1);
  EMBER_RETURN_IF_ERROR(CheckOutput("MixtureForward", "out", out, DType::kF32, {batch, hidden}));
  const float* g = gate.data<float>();
  const float* x = experts.data<float>();
  float* y = out->data<float>();
  ParallelFor(0, batch, RowGrain(num_experts * hidden), [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      float* yb = y + b * hidden;
      std::fill(yb, yb + hidden, 0.0f);
      for (int64_t e = 0; e < num_experts; ++e) {
        const float w = g[b * num_experts + e];
        const float* xe = x + (b * num_experts + e) * hidden;
        for (int64_t h = 0; h < hidden; ++h) yb[h] += w * xe[h];
      }
    }
  });
  return Status::OK();
}

Status MixtureBackward(const Tensor& gate, const Tensor& experts, const Tensor& dout,
                       Tensor* dgate, Tensor* dexperts) {
  int64_t hidden = 0;
  EMBER_RETURN_IF_ERROR(CheckMixture("MixtureBackward", gate, experts, &hidden));
  const int64_t batch = gate.dim(0);
  const int64_t num_experts = gate.dim(1);
  EMBER_RETURN_IF_ERROR(CheckTensor("MixtureBackward", "dout", dout, DType::kF32, {batch, hidden}));
  if (dgate != nullptr) {
    EMBER_RETURN_IF_ERROR(
        CheckOutput("MixtureBackward", "dgate", dgate, DType::kF32, gate.shape()));
  }
  if (dexperts != nullptr) {
    EMBER_RETURN_IF_ERROR(
        CheckOutput("MixtureBackward", "dexperts", dexperts, DType::kF32, experts.shape()));
  }
  const float* g = gate.data<float>();
  const float* x = experts.data<float>();
  const float* dy = dout.data<float>();
  float* dg = dgate != nullptr ? dgate->data<float>() : nullptr;
  float* dx = dexperts != nullptr ? dexperts->data<float>() : nullptr;
  ParallelFor(0, batch, RowGrain(num_experts * hidden), [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const float* dyb = dy + b * hidden;
      for (int64_t e = 0; e < num_experts; ++e) {
        const int64_t row = b * num_experts + e;
        if (dg != nullptr) {
          const float* xe = x + row * hidden;
          double dot = 0.0;
          for (int64_t h = 0; h < hidden; ++h) dot += double{dyb[h]} * xe[h];
          dg[row] = static_cast<float>(dot);
        }
        if (dx != nullptr) {
          const float w = g[row];
          float* dxe = dx + row * hidden;
          for (int64_t h = 0; h < hidden; ++h) dxe[h] = w * dyb[h];
        }
      }
    }
  });
  return Status::OK();
}

OpCost MixtureCost(int64_t batch, int64_t experts, int64_t hidden, bool backward) {
  const double b = static_cast<double>(batch);
  const double e = static_cast<double>(experts);
  const double h = static_cast<double>(hidden);
  if (backward) return OpCost{3 * b * e * h, 4 * (2 * b * e * h + 2 * b * e + b * h)};
  return OpCost{2 * b * e * h, 4 * (b * e * h + b * e + b * h)};
}

}  // namespace ember::ops
