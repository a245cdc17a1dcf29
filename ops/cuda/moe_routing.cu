// Mixture-of-experts routing on CUDA: softmax (one warp per token), top-k
// selection (one thread per token, k passes over the experts in the CPU
// operator's order: larger probability first, ties to the lower index), slot
// assignment in token order through a stable radix sort of the choices by
// expert (a choice's slot is the number of earlier choices of its expert, as
// the CPU operator's sequential fill gives), and dispatch/combine as gathers
// and scatters with one thread per element and no atomics on values.

#include <cub/device/device_radix_sort.cuh>

#include "ops/cuda/common.h"
#include "ops/dense_ops_cuda.h"
#include "ops/moe_routing_cuda.h"

namespace ember::ops {
namespace {

using cuda::DeviceScratch;

constexpr int kThreads = 256;
constexpr unsigned long long kNone = ~0ULL;

#define EMBER_FOR_EACH_INDEX(i, n)                                                     \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// Grid-stride over rows, one warp each.
#define EMBER_FOR_EACH_WARP_ROW(row, rows)                                                 \
  for (int64_t row = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32; \
       row < (rows); row += static_cast<int64_t>(gridDim.x) * blockDim.x / 32)

__device__ double WarpSum(double v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__global__ void SoftmaxKernel(const float* z, int64_t rows, int64_t experts, float* p) {
  const int lane = threadIdx.x % 32;
  EMBER_FOR_EACH_WARP_ROW(b, rows) {
    const float* zr = z + b * experts;
    float* pr = p + b * experts;
    float max = -INFINITY;
    for (int64_t e = lane; e < experts; e += 32) max = fmaxf(max, zr[e]);
    for (int offset = 16; offset > 0; offset /= 2) {
      max = fmaxf(max, __shfl_xor_sync(0xffffffffu, max, offset));
    }
    double sum = 0.0;
    for (int64_t e = lane; e < experts; e += 32) {
      pr[e] = expf(zr[e] - max);
      sum += pr[e];
    }
    const float inv = static_cast<float>(1.0 / WarpSum(sum));
    for (int64_t e = lane; e < experts; e += 32) pr[e] *= inv;
  }
}

__global__ void SoftmaxBackwardKernel(const float* p, const float* dp, int64_t rows,
                                      int64_t experts, float* dz) {
  const int lane = threadIdx.x % 32;
  EMBER_FOR_EACH_WARP_ROW(b, rows) {
    const int64_t row = b * experts;
    double dot = 0.0;
    for (int64_t e = lane; e < experts; e += 32) {
      dot += static_cast<double>(dp[row + e]) * p[row + e];
    }
    const float dotf = static_cast<float>(WarpSum(dot));
    for (int64_t e = lane; e < experts; e += 32) dz[row + e] = p[row + e] * (dp[row + e] - dotf);
  }
}

// What RouteTopKCuda reports back to the host.
struct RoutingReport {
  unsigned long long bad_prob;    // first flat index of a bad probability, or kNone
  unsigned long long zero_token;  // first token whose top-k sum to 0 (normalising), or kNone
  unsigned long long dropped;
};

__global__ void CheckProbsKernel(const float* p, int64_t n, RoutingReport* report) {
  EMBER_FOR_EACH_INDEX(i, n) {
    if (!(p[i] >= 0.0f) || !isfinite(p[i])) {
      atomicMin(&report->bad_prob, static_cast<unsigned long long>(i));
    }
  }
}

// True when (pa, a) comes before (pb, b): larger probability first, ties to
// the lower index (the CPU operator's TopK order).
__device__ bool Before(float pa, int64_t a, float pb, int64_t b) {
  return pa > pb || (pa == pb && a < b);
}

__global__ void SelectKernel(const float* p, int64_t batch, int64_t experts, int64_t k,
                             int normalize, int32_t* expert, float* gate,
                             RoutingReport* report) {
  EMBER_FOR_EACH_INDEX(b, batch) {
    const float* row = p + b * experts;
    int64_t prev = -1;
    double sum = 0.0;
    for (int64_t j = 0; j < k; ++j) {
      // The first expert in the order among those after `prev`.
      int64_t best = -1;
      for (int64_t e = 0; e < experts; ++e) {
        if (prev >= 0 && !Before(row[prev], prev, row[e], e)) continue;
        if (best < 0 || Before(row[e], e, row[best], best)) best = e;
      }
      // Only NaNs (reported by CheckProbsKernel) leave no candidate.
      if (best < 0) best = 0;
      expert[b * k + j] = static_cast<int32_t>(best);
      sum += row[best];
      prev = best;
    }
    if (normalize && !(sum > 0.0)) {
      atomicMin(&report->zero_token, static_cast<unsigned long long>(b));
    }
    const double scale = normalize ? 1.0 / sum : 1.0;
    for (int64_t j = 0; j < k; ++j) {
      gate[b * k + j] = static_cast<float>(row[expert[b * k + j]] * scale);
    }
  }
}

__global__ void IotaKernel(int32_t* values, int64_t n) {
  EMBER_FOR_EACH_INDEX(i, n) { values[i] = static_cast<int32_t>(i); }
}

// For the choices sorted (stably) by expert: a choice's slot is its rank in
// its expert's run; past the capacity it is dropped.
__global__ void AssignSlotsKernel(const int32_t* sorted_experts, const int32_t* sorted_choices,
                                  int64_t n, int64_t capacity, int32_t* slot, float* gate,
                                  RoutingReport* report) {
  EMBER_FOR_EACH_INDEX(q, n) {
    const int32_t e = sorted_experts[q];
    int64_t lo = 0, hi = q;  // first position of expert e
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (sorted_experts[mid] < e) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    const int64_t rank = q - lo;
    const int32_t i = sorted_choices[q];
    if (rank < capacity) {
      slot[i] = static_cast<int32_t>(rank);
    } else {
      slot[i] = -1;
      gate[i] = 0.0f;
      atomicAdd(&report->dropped, 1ULL);
    }
  }
}

__device__ bool Kept(const int32_t* expert, const int32_t* slot, int64_t i, int64_t experts,
                     int64_t capacity) {
  return slot[i] >= 0 && slot[i] < capacity && expert[i] >= 0 && expert[i] < experts;
}

__global__ void GateBackwardKernel(const float* p, const int32_t* expert, const int32_t* slot,
                                   const float* dg, int64_t batch, int64_t experts, int64_t k,
                                   int64_t capacity, int normalize, float* dp) {
  EMBER_FOR_EACH_INDEX(b, batch) {
    const float* pr = p + b * experts;
    float* dpr = dp + b * experts;
    for (int64_t e = 0; e < experts; ++e) dpr[e] = 0.0f;
    const int64_t base = b * k;
    bool valid = true;
    for (int64_t j = 0; j < k; ++j) {
      valid = valid && expert[base + j] >= 0 && expert[base + j] < experts;
    }
    if (!valid) continue;
    if (!normalize) {
      for (int64_t j = 0; j < k; ++j) {
        if (Kept(expert, slot, base + j, experts, capacity)) dpr[expert[base + j]] = dg[base + j];
      }
      continue;
    }
    // gate_j = p_j / S, S the sum over all k choices (ops/moe_routing.cc).
    double sum = 0.0;
    for (int64_t j = 0; j < k; ++j) sum += pr[expert[base + j]];
    if (!(sum > 0.0)) continue;
    double dot = 0.0;
    for (int64_t j = 0; j < k; ++j) {
      if (Kept(expert, slot, base + j, experts, capacity)) {
        dot += static_cast<double>(dg[base + j]) * pr[expert[base + j]];
      }
    }
    dot /= sum;
    for (int64_t j = 0; j < k; ++j) {
      const double own = Kept(expert, slot, base + j, experts, capacity) ? dg[base + j] : 0.0;
      dpr[expert[base + j]] = static_cast<float>((own - dot) / sum);
    }
  }
}

// buffers[expert, slot, h] = x[b, h] for every kept choice (b, j).
__global__ void DispatchKernel(const float* x, const int32_t* expert, const int32_t* slot,
                               int64_t choices, int64_t k, int64_t hidden, int64_t experts,
                               int64_t capacity, float* buffers) {
  EMBER_FOR_EACH_INDEX(t, choices * hidden) {
    const int64_t i = t / hidden, h = t % hidden;
    if (!Kept(expert, slot, i, experts, capacity)) continue;
    buffers[(expert[i] * capacity + slot[i]) * hidden + h] = x[(i / k) * hidden + h];
  }
}

// out[b, h] = sum over the kept choices j of weight_j * src[expert, slot, h],
// in choice order, multiply and add rounded separately like the CPU loop.
__global__ void GatherSlotsKernel(const float* src, const float* weights, const int32_t* expert,
                                  const int32_t* slot, int64_t batch, int64_t k, int64_t hidden,
                                  int64_t experts, int64_t capacity, float* out) {
  EMBER_FOR_EACH_INDEX(t, batch * hidden) {
    const int64_t b = t / hidden, h = t % hidden;
    float sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t i = b * k + j;
      if (!Kept(expert, slot, i, experts, capacity)) continue;
      const float y = src[(expert[i] * capacity + slot[i]) * hidden + h];
      sum = __fadd_rn(sum, weights != nullptr ? __fmul_rn(weights[i], y) : y);
    }
    out[t] = sum;
  }
}

__global__ void GateGradientKernel(const float* y, const float* dy, const int32_t* expert,
                                   const int32_t* slot, int64_t choices, int64_t k,
                                   int64_t hidden, int64_t experts, int64_t capacity, float* dg) {
  EMBER_FOR_EACH_INDEX(i, choices) {
    double dot = 0.0;
    if (Kept(expert, slot, i, experts, capacity)) {
      const float* yr = y + (expert[i] * capacity + slot[i]) * hidden;
      const float* dyr = dy + (i / k) * hidden;
      for (int64_t h = 0; h < hidden; ++h) dot += static_cast<double>(dyr[h]) * yr[h];
    }
    dg[i] = static_cast<float>(dot);
  }
}

__global__ void SlotOwnersKernel(const int32_t* expert, const int32_t* slot, int64_t choices,
                                 int64_t experts, int64_t capacity, int64_t* owners) {
  EMBER_FOR_EACH_INDEX(i, choices) {
    if (Kept(expert, slot, i, experts, capacity)) owners[expert[i] * capacity + slot[i]] = i;
  }
}

__global__ void ExpertGradientKernel(const int64_t* owners, const float* gate, const float* dy,
                                     int64_t rows, int64_t k, int64_t hidden, float* dyo) {
  EMBER_FOR_EACH_INDEX(t, rows * hidden) {
    const int64_t r = t / hidden, h = t % hidden;
    const int64_t owner = owners[r];
    dyo[t] = owner < 0 ? 0.0f : gate[owner] * dy[(owner / k) * hidden + h];
  }
}

// out[b, h] = sum over e of gate[b, e] * experts[b, e, h], in expert order.
__global__ void MixtureKernel(const float* gate, const float* experts, int64_t batch,
                              int64_t num_experts, int64_t hidden, float* out) {
  EMBER_FOR_EACH_INDEX(t, batch * hidden) {
    const int64_t b = t / hidden, h = t % hidden;
    float sum = 0.0f;
    for (int64_t e = 0; e < num_experts; ++e) {
      sum = __fadd_rn(sum, __fmul_rn(gate[b * num_experts + e],
                                     experts[(b * num_experts + e) * hidden + h]));
    }
    out[t] = sum;
  }
}

__global__ void MixtureGateGradientKernel(const float* experts, const float* dout, int64_t batch,
                                          int64_t num_experts, int64_t hidden, float* dgate) {
  EMBER_FOR_EACH_INDEX(t, batch * num_experts) {
    const int64_t b = t / num_experts;
    const float* x = experts + t * hidden;
    const float* dy = dout + b * hidden;
    double dot = 0.0;
    for (int64_t h = 0; h < hidden; ++h) dot += static_cast<double>(dy[h]) * x[h];
    dgate[t] = static_cast<float>(dot);
  }
}

__global__ void MixtureExpertGradientKernel(const float* gate, const float* dout, int64_t batch,
                                            int64_t num_experts, int64_t hidden,
                                            float* dexperts) {
  EMBER_FOR_EACH_INDEX(t, batch * num_experts * hidden) {
    const int64_t h = t % hidden, be = t / hidden, b = be / num_experts;
    dexperts[t] = gate[be] * dout[b * hidden + h];
  }
}

// The routing value of the graph operators: [B, 2, k] f32, experts then slots.
__global__ void EncodeRoutingKernel(const int32_t* expert, const int32_t* slot, int64_t batch,
                                    int64_t k, float* encoded) {
  EMBER_FOR_EACH_INDEX(i, batch * k) {
    const int64_t b = i / k, j = i % k;
    encoded[b * 2 * k + j] = static_cast<float>(expert[i]);
    encoded[(b * 2 + 1) * k + j] = static_cast<float>(slot[i]);
  }
}

__global__ void DecodeRoutingKernel(const float* encoded, int64_t batch, int64_t k, int32_t* expert,
                                    int32_t* slot) {
  EMBER_FOR_EACH_INDEX(i, batch * k) {
    const int64_t b = i / k, j = i % k;
    // moe_route writes exact integers; anything else converts saturating
    // (NaN to 0), and the routing kernels skip indices out of range.
    expert[i] = __float2int_rn(encoded[b * 2 * k + j]);
    slot[i] = __float2int_rn(encoded[(b * 2 + 1) * k + j]);
  }
}

#undef EMBER_FOR_EACH_INDEX
#undef EMBER_FOR_EACH_WARP_ROW

int WarpGrid(int64_t rows) { return cuda::GridFor(rows * 32, kThreads); }

int KeyBits(int64_t max_key) {
  int bits = 1;
  while (bits < 31 && (int64_t{1} << bits) <= max_key) ++bits;
  return bits;
}

// The routing's tensors: i32 expert and slot [B, k] and f32 gate on `device`.
// Sets *batch and *k.
Status CheckRouting(const char* op, const MoeRouting& routing, const Device& device,
                    int64_t* batch, int64_t* k) {
  if (routing.num_experts < 1 || routing.capacity < 0) {
    return Status::InvalidArgument(op, ": routing has num_experts = ", routing.num_experts,
                                   " and capacity = ", routing.capacity,
                                   "; expected >= 1 and >= 0");
  }
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceRank(op, "routing.expert", routing.expert, DType::kI32, 2, device));
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceTensor(op, "routing.slot", routing.slot, DType::kI32,
                                                routing.expert.shape(), device));
  *batch = routing.expert.dim(0);
  *k = routing.expert.dim(1);
  return Status::OK();
}

Status Zero(const char* op, Tensor* t, cudaStream_t stream) {
  if (t->numel() == 0) return Status::OK();
  return cuda::CudaCall(cudaMemsetAsync(t->raw_data(), 0, t->nbytes(), stream), op,
                        "cudaMemsetAsync");
}


// gate f32 [B, E] and experts f32 [B, E, H] or [B, E * H] on `device`; sets *hidden.
Status CheckMixture(const char* op, const Tensor& gate, const Tensor& experts,
                    const Device& device, int64_t* hidden) {
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceRank(op, "gate", gate, DType::kF32, 2, device));
  const int64_t batch = gate.dim(0), num_experts = gate.dim(1);
  if (num_experts < 1) {
    return Status::InvalidArgument(op, ": gate must have at least one expert, got ",
                                   gate.DebugString());
  }
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceAny(op, "experts", experts, DType::kF32, device));
  if (experts.ndim() == 3) {
    *hidden = experts.dim(2);
    return cuda::CheckDeviceTensor(op, "experts", experts, DType::kF32,
                                   {batch, num_experts, *hidden}, device);
  }
  if (experts.ndim() == 2 && experts.dim(1) % num_experts == 0) {
    *hidden = experts.dim(1) / num_experts;
    return cuda::CheckDeviceTensor(op, "experts", experts, DType::kF32,
                                   {batch, num_experts * *hidden}, device);
  }
  return Status::InvalidArgument(op, ": experts must be f32[", batch, ", ", num_experts,
                                 ", H] or f32[", batch, ", ", num_experts, " * H] on ",
                                 device.ToString(), ", got ", experts.DebugString());
}

}  // namespace

Status SoftmaxForwardCuda(const Tensor& logits, Tensor* probs, CudaStream& stream) {
  constexpr const char* kOp = "SoftmaxForwardCuda";
  const Device device = Device::Cuda(stream.device());
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceRank(kOp, "logits", logits, DType::kF32, 2, device));
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceOutput(kOp, "probs", probs, DType::kF32, logits.shape(), device));
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  const int64_t batch = logits.dim(0), experts = logits.dim(1);
  if (batch * experts == 0) return Status::OK();
  SoftmaxKernel<<<WarpGrid(batch), kThreads, 0, cuda::Native(stream)>>>(
      logits.data<float>(), batch, experts, probs->data<float>());
  return cuda::CheckLaunch(kOp, "SoftmaxKernel");
}

Status SoftmaxBackwardCuda(const Tensor& probs, const Tensor& dprobs, Tensor* dlogits,
                           CudaStream& stream) {
  constexpr const char* kOp = "SoftmaxBackwardCuda";
  const Device device = Device::Cuda(stream.device());
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceRank(kOp, "probs", probs, DType::kF32, 2, device));
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceTensor(kOp, "dprobs", dprobs, DType::kF32, probs.shape(), device));
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceOutput(kOp, "dlogits", dlogits, DType::kF32, probs.shape(), device));
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  const int64_t batch = probs.dim(0), experts = probs.dim(1);
  if (batch * experts == 0) return Status::OK();
  SoftmaxBackwardKernel<<<WarpGrid(batch), kThreads, 0, cuda::Native(stream)>>>(
      probs.data<float>(), dprobs.data<float>(), batch, experts, dlogits->data<float>());
  return cuda::CheckLaunch(kOp, "SoftmaxBackwardKernel");
}

Result<MoeRouting> RouteTopKCuda(const Tensor& probs, const MoeRoutingOptions& options,
                                 CudaStream& stream) {
  constexpr const char* kOp = "RouteTopKCuda";
  const Device device = Device::Cuda(stream.device());
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceRank(kOp, "probs", probs, DType::kF32, 2, device));
  const int64_t batch = probs.dim(0), experts = probs.dim(1), k = options.k;
  if (experts < 1) {
    return Status::InvalidArgument(kOp, ": probs must have at least one expert, got ",
                                   probs.DebugString());
  }
  Result<int64_t> capacity_or = MoeRoutingCapacity(batch, experts, options);
  if (!capacity_or.ok()) return capacity_or.status().WithContext(kOp);
  const int64_t capacity = *capacity_or;
  EMBER_RETURN_IF_ERROR(cuda::CheckFitsInt(kOp, "tokens x k", batch * k));
  EMBER_RETURN_IF_ERROR(cuda::CheckFitsInt(kOp, "the number of experts", experts));
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  MoeRouting routing;
  routing.num_experts = experts;
  routing.capacity = capacity;
  routing.normalize_gates = options.normalize_gates;
  EMBER_ASSIGN_OR_RETURN(routing.expert, Tensor::Allocate({batch, k}, DType::kI32, device));
  EMBER_ASSIGN_OR_RETURN(routing.slot, Tensor::Allocate({batch, k}, DType::kI32, device));
  EMBER_ASSIGN_OR_RETURN(routing.gate, Tensor::Allocate({batch, k}, DType::kF32, device));
  const cudaStream_t s = cuda::Native(stream);
  DeviceScratch scratch(stream);
  EMBER_ASSIGN_OR_RETURN(RoutingReport * report, scratch.Get<RoutingReport>(kOp, 1));
  const RoutingReport initial{kNone, kNone, 0};
  EMBER_RETURN_IF_ERROR(cuda::CudaCall(
      cudaMemcpyAsync(report, &initial, sizeof(initial), cudaMemcpyHostToDevice, s), kOp,
      "cudaMemcpyAsync"));
  const int64_t choices = batch * k;
  if (choices > 0) {
    CheckProbsKernel<<<cuda::GridFor(batch * experts, kThreads), kThreads, 0, s>>>(
        probs.data<float>(), batch * experts, report);
    EMBER_RETURN_IF_ERROR(cuda::CheckLaunch(kOp, "CheckProbsKernel"));
    int32_t* expert = routing.expert.data<int32_t>();
    float* gate = routing.gate.data<float>();
    SelectKernel<<<cuda::GridFor(batch, kThreads), kThreads, 0, s>>>(
        probs.data<float>(), batch, experts, k, options.normalize_gates ? 1 : 0, expert, gate,
        report);
    EMBER_RETURN_IF_ERROR(cuda::CheckLaunch(kOp, "SelectKernel"));
    EMBER_ASSIGN_OR_RETURN(int32_t * choice_ids, scratch.Get<int32_t>(kOp, choices));
    EMBER_ASSIGN_OR_RETURN(int32_t * sorted_experts, scratch.Get<int32_t>(kOp, choices));
    EMBER_ASSIGN_OR_RETURN(int32_t * sorted_choices, scratch.Get<int32_t>(kOp, choices));
    IotaKernel<<<cuda::GridFor(choices, kThreads), kThreads, 0, s>>>(choice_ids, choices);
    EMBER_RETURN_IF_ERROR(cuda::CheckLaunch(kOp, "IotaKernel"));
    // Stable (LSD radix), so each expert's choices stay in token order.
    const int end_bit = KeyBits(experts - 1);
    size_t temp_bytes = 0;
    EMBER_RETURN_IF_ERROR(cuda::CudaCall(
        cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, expert, sorted_experts, choice_ids,
                                        sorted_choices, static_cast<int>(choices), 0, end_bit, s),
        kOp, "cub::DeviceRadixSort (size)"));
    EMBER_ASSIGN_OR_RETURN(uint8_t * temp,
                           scratch.Get<uint8_t>(kOp, static_cast<int64_t>(temp_bytes)));
    EMBER_RETURN_IF_ERROR(cuda::CudaCall(
        cub::DeviceRadixSort::SortPairs(temp, temp_bytes, expert, sorted_experts, choice_ids,
                                        sorted_choices, static_cast<int>(choices), 0, end_bit, s),
        kOp, "cub::DeviceRadixSort"));
    AssignSlotsKernel<<<cuda::GridFor(choices, kThreads), kThreads, 0, s>>>(
        sorted_experts, sorted_choices, choices, capacity, routing.slot.data<int32_t>(), gate,
        report);
    EMBER_RETURN_IF_ERROR(cuda::CheckLaunch(kOp, "AssignSlotsKernel"));
  }
  RoutingReport result{};
  EMBER_RETURN_IF_ERROR(cuda::CudaCall(
      cudaMemcpyAsync(&result, report, sizeof(result), cudaMemcpyDeviceToHost, s), kOp,
      "cudaMemcpyAsync"));
  EMBER_RETURN_IF_ERROR(stream.Synchronize().WithContext(kOp));
  if (result.bad_prob != kNone) {
    const int64_t i = static_cast<int64_t>(result.bad_prob);
    return Status::InvalidArgument(kOp, ": probs[", i / experts, ", ", i % experts,
                                   "] is not a finite non-negative probability");
  }
  if (result.zero_token != kNone) {
    return Status::InvalidArgument(kOp, ": the top-", k, " probabilities of token ",
                                   result.zero_token, " sum to 0 and cannot be normalised");
  }
  routing.num_dropped = static_cast<int64_t>(result.dropped);
  return routing;
}

Status MoeGateBackwardCuda(const Tensor& probs, const MoeRouting& routing, const Tensor& dgate,
                           Tensor* dprobs, CudaStream& stream) {
  constexpr const char* kOp = "MoeGateBackwardCuda";
  const Device device = Device::Cuda(stream.device());
  int64_t batch = 0, k = 0;
  EMBER_RETURN_IF_ERROR(CheckRouting(kOp, routing, device, &batch, &k));
  const int64_t experts = routing.num_experts;
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceTensor(kOp, "probs", probs, DType::kF32, {batch, experts}, device));
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceTensor(kOp, "dgate", dgate, DType::kF32, {batch, k}, device));
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceOutput(kOp, "dprobs", dprobs, DType::kF32, {batch, experts}, device));
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  if (batch == 0) return Status::OK();
  GateBackwardKernel<<<cuda::GridFor(batch, kThreads), kThreads, 0, cuda::Native(stream)>>>(
      probs.data<float>(), routing.expert.data<int32_t>(), routing.slot.data<int32_t>(),
      dgate.data<float>(), batch, experts, k, routing.capacity, routing.normalize_gates ? 1 : 0,
      dprobs->data<float>());
  return cuda::CheckLaunch(kOp, "GateBackwardKernel");
}

Status MoeDispatchCuda(const Tensor& x, const MoeRouting& routing, Tensor* buffers,
                       CudaStream& stream) {
  constexpr const char* kOp = "MoeDispatchCuda";
  const Device device = Device::Cuda(stream.device());
  int64_t batch = 0, k = 0;
  EMBER_RETURN_IF_ERROR(CheckRouting(kOp, routing, device, &batch, &k));
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceRank(kOp, "x", x, DType::kF32, 2, device));
  const int64_t hidden = x.dim(1);
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceTensor(kOp, "x", x, DType::kF32, {batch, hidden}, device));
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceOutput(
      kOp, "buffers", buffers, DType::kF32, {routing.num_experts, routing.capacity, hidden},
      device));
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  const cudaStream_t s = cuda::Native(stream);
  EMBER_RETURN_IF_ERROR(Zero(kOp, buffers, s));
  if (batch * k * hidden == 0) return Status::OK();
  DispatchKernel<<<cuda::GridFor(batch * k * hidden, kThreads), kThreads, 0, s>>>(
      x.data<float>(), routing.expert.data<int32_t>(), routing.slot.data<int32_t>(), batch * k, k,
      hidden, routing.num_experts, routing.capacity, buffers->data<float>());
  return cuda::CheckLaunch(kOp, "DispatchKernel");
}

Status MoeDispatchBackwardCuda(const Tensor& dbuffers, const MoeRouting& routing, Tensor* dx,
                               CudaStream& stream) {
  constexpr const char* kOp = "MoeDispatchBackwardCuda";
  const Device device = Device::Cuda(stream.device());
  int64_t batch = 0, k = 0;
  EMBER_RETURN_IF_ERROR(CheckRouting(kOp, routing, device, &batch, &k));
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceRank(kOp, "dbuffers", dbuffers, DType::kF32, 3, device));
  const int64_t hidden = dbuffers.dim(2);
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceTensor(kOp, "dbuffers", dbuffers, DType::kF32,
                                                {routing.num_experts, routing.capacity, hidden},
                                                device));
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceOutput(kOp, "dx", dx, DType::kF32, {batch, hidden}, device));
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  if (batch * hidden == 0) return Status::OK();
  GatherSlotsKernel<<<cuda::GridFor(batch * hidden, kThreads), kThreads, 0,
                      cuda::Native(stream)>>>(
      dbuffers.data<float>(), nullptr, routing.expert.data<int32_t>(),
      routing.slot.data<int32_t>(), batch, k, hidden, routing.num_experts, routing.capacity,
      dx->data<float>());
  return cuda::CheckLaunch(kOp, "GatherSlotsKernel");
}

Status MoeCombineCuda(const Tensor& expert_out, const Tensor& gate, const MoeRouting& routing,
                      Tensor* out, CudaStream& stream) {
  constexpr const char* kOp = "MoeCombineCuda";
  const Device device = Device::Cuda(stream.device());
  int64_t batch = 0, k = 0;
  EMBER_RETURN_IF_ERROR(CheckRouting(kOp, routing, device, &batch, &k));
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceRank(kOp, "expert_out", expert_out, DType::kF32, 3, device));
  const int64_t hidden = expert_out.dim(2);
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceTensor(kOp, "expert_out", expert_out, DType::kF32,
                                                {routing.num_experts, routing.capacity, hidden},
                                                device));
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceTensor(kOp, "gate", gate, DType::kF32, {batch, k}, device));
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceOutput(kOp, "out", out, DType::kF32, {batch, hidden}, device));
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  if (batch * hidden == 0) return Status::OK();
  GatherSlotsKernel<<<cuda::GridFor(batch * hidden, kThreads), kThreads, 0,
                      cuda::Native(stream)>>>(
      expert_out.data<float>(), gate.data<float>(), routing.expert.data<int32_t>(),
      routing.slot.data<int32_t>(), batch, k, hidden, routing.num_experts, routing.capacity,
      out->data<float>());
  return cuda::CheckLaunch(kOp, "GatherSlotsKernel");
}

Status MoeCombineBackwardCuda(const Tensor& expert_out, const Tensor& gate,
                              const MoeRouting& routing, const Tensor& dout, Tensor* dexpert_out,
                              Tensor* dgate, CudaStream& stream) {
  constexpr const char* kOp = "MoeCombineBackwardCuda";
  const Device device = Device::Cuda(stream.device());
  int64_t batch = 0, k = 0;
  EMBER_RETURN_IF_ERROR(CheckRouting(kOp, routing, device, &batch, &k));
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceRank(kOp, "expert_out", expert_out, DType::kF32, 3, device));
  const int64_t hidden = expert_out.dim(2);
  const std::vector<int64_t> buffer_shape = {routing.num_experts, routing.capacity, hidden};
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceTensor(kOp, "expert_out", expert_out, DType::kF32, buffer_shape, device));
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceTensor(kOp, "gate", gate, DType::kF32, {batch, k}, device));
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceTensor(kOp, "dout", dout, DType::kF32, {batch, hidden}, device));
  if (dexpert_out != nullptr) {
    EMBER_RETURN_IF_ERROR(cuda::CheckDeviceOutput(kOp, "dexpert_out", dexpert_out, DType::kF32,
                                                  buffer_shape, device));
  }
  if (dgate != nullptr) {
    EMBER_RETURN_IF_ERROR(
        cuda::CheckDeviceOutput(kOp, "dgate", dgate, DType::kF32, {batch, k}, device));
  }
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  const cudaStream_t s = cuda::Native(stream);
  const int32_t* expert = routing.expert.data<int32_t>();
  const int32_t* slot = routing.slot.data<int32_t>();
  if (dgate != nullptr && batch * k > 0) {
    GateGradientKernel<<<cuda::GridFor(batch * k, kThreads), kThreads, 0, s>>>(
        expert_out.data<float>(), dout.data<float>(), expert, slot, batch * k, k, hidden,
        routing.num_experts, routing.capacity, dgate->data<float>());
    EMBER_RETURN_IF_ERROR(cuda::CheckLaunch(kOp, "GateGradientKernel"));
  }
  if (dexpert_out == nullptr || dexpert_out->numel() == 0) return Status::OK();
  const int64_t rows = routing.num_experts * routing.capacity;
  DeviceScratch scratch(stream);
  EMBER_ASSIGN_OR_RETURN(int64_t * owners, scratch.Get<int64_t>(kOp, rows));
  // All bits set: owner -1 for every row no choice claims.
  EMBER_RETURN_IF_ERROR(cuda::CudaCall(
      cudaMemsetAsync(owners, 0xff, static_cast<size_t>(rows) * sizeof(int64_t), s), kOp,
      "cudaMemsetAsync"));
  if (batch * k > 0) {
    SlotOwnersKernel<<<cuda::GridFor(batch * k, kThreads), kThreads, 0, s>>>(
        expert, slot, batch * k, routing.num_experts, routing.capacity, owners);
    EMBER_RETURN_IF_ERROR(cuda::CheckLaunch(kOp, "SlotOwnersKernel"));
  }
  ExpertGradientKernel<<<cuda::GridFor(rows * hidden, kThreads), kThreads, 0, s>>>(
      owners, gate.data<float>(), dout.data<float>(), rows, k, hidden, dexpert_out->data<float>());
  return cuda::CheckLaunch(kOp, "ExpertGradientKernel");
}

Status MixtureForwardCuda(const Tensor& gate, const Tensor& experts, Tensor* out,
                          CudaStream& stream) {
  constexpr const char* kOp = "MixtureForwardCuda";
  const Device device = Device::Cuda(stream.device());
  int64_t hidden = 0;
  EMBER_RETURN_IF_ERROR(CheckMixture(kOp, gate, experts, device, &hidden));
  const int64_t batch = gate.dim(0), num_experts = gate.dim(1);
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceOutput(kOp, "out", out, DType::kF32, {batch, hidden}, device));
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  if (batch * hidden == 0) return Status::OK();
  MixtureKernel<<<cuda::GridFor(batch * hidden, kThreads), kThreads, 0, cuda::Native(stream)>>>(
      gate.data<float>(), experts.data<float>(), batch, num_experts, hidden, out->data<float>());
  return cuda::CheckLaunch(kOp, "MixtureKernel");
}

Status MixtureBackwardCuda(const Tensor& gate, const Tensor& experts, const Tensor& dout,
                           Tensor* dgate, Tensor* dexperts, CudaStream& stream) {
  constexpr const char* kOp = "MixtureBackwardCuda";
  const Device device = Device::Cuda(stream.device());
  int64_t hidden = 0;
  EMBER_RETURN_IF_ERROR(CheckMixture(kOp, gate, experts, device, &hidden));
  const int64_t batch = gate.dim(0), num_experts = gate.dim(1);
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceTensor(kOp, "dout", dout, DType::kF32, {batch, hidden}, device));
  if (dgate != nullptr) {
    EMBER_RETURN_IF_ERROR(
        cuda::CheckDeviceOutput(kOp, "dgate", dgate, DType::kF32, gate.shape(), device));
  }
  if (dexperts != nullptr) {
    EMBER_RETURN_IF_ERROR(
        cuda::CheckDeviceOutput(kOp, "dexperts", dexperts, DType::kF32, experts.shape(), device));
  }
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  const cudaStream_t s = cuda::Native(stream);
  if (dgate != nullptr && batch * num_experts > 0) {
    MixtureGateGradientKernel<<<cuda::GridFor(batch * num_experts, kThreads), kThreads, 0, s>>>(
        experts.data<float>(), dout.data<float>(), batch, num_experts, hidden,
        dgate->data<float>());
    EMBER_RETURN_IF_ERROR(cuda::CheckLaunch(kOp, "MixtureGateGradientKernel"));
  }
  if (dexperts != nullptr && dexperts->numel() > 0) {
    MixtureExpertGradientKernel<<<cuda::GridFor(dexperts->numel(), kThreads), kThreads, 0, s>>>(
        gate.data<float>(), dout.data<float>(), batch, num_experts, hidden,
        dexperts->data<float>());
    EMBER_RETURN_IF_ERROR(cuda::CheckLaunch(kOp, "MixtureExpertGradientKernel"));
  }
  return Status::OK();
}

Status EncodeMoeRoutingCuda(const MoeRouting& routing, Tensor* encoded, CudaStream& stream) {
  constexpr const char* kOp = "EncodeMoeRoutingCuda";
  const Device device = Device::Cuda(stream.device());
  int64_t batch = 0, k = 0;
  EMBER_RETURN_IF_ERROR(CheckRouting(kOp, routing, device, &batch, &k));
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceOutput(kOp, "encoded", encoded, DType::kF32, {batch, 2, k}, device));
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  if (batch * k == 0) return Status::OK();
  EncodeRoutingKernel<<<cuda::GridFor(batch * k, kThreads), kThreads, 0, cuda::Native(stream)>>>(
      routing.expert.data<int32_t>(), routing.slot.data<int32_t>(), batch, k,
      encoded->data<float>());
  return cuda::CheckLaunch(kOp, "EncodeRoutingKernel");
}

Status DecodeMoeRoutingCuda(const Tensor& encoded, MoeRouting* routing, CudaStream& stream) {
  constexpr const char* kOp = "DecodeMoeRoutingCuda";
  const Device device = Device::Cuda(stream.device());
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceRank(kOp, "encoded", encoded, DType::kF32, 3, device));
  const int64_t batch = encoded.dim(0), k = encoded.dim(2);
  if (encoded.dim(1) != 2) {
    return Status::InvalidArgument(kOp, ": encoded is ", encoded.DebugString(),
                                   ", expected [B, 2, k]");
  }
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  EMBER_ASSIGN_OR_RETURN(routing->expert,
                         Tensor::Allocate({batch, k}, DType::kI32, device, stream.allocator()));
  EMBER_ASSIGN_OR_RETURN(routing->slot,
                         Tensor::Allocate({batch, k}, DType::kI32, device, stream.allocator()));
  if (batch * k == 0) return Status::OK();
  DecodeRoutingKernel<<<cuda::GridFor(batch * k, kThreads), kThreads, 0, cuda::Native(stream)>>>(
      encoded.data<float>(), batch, k, routing->expert.data<int32_t>(),
      routing->slot.data<int32_t>());
  return cuda::CheckLaunch(kOp, "DecodeRoutingKernel");
}

}  // namespace ember::ops
