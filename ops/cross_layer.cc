// DCN-v2 cross layer (Wang et al. 2021, "DCN V2: Improved Deep & Cross Network
// and Practical Lessons for Web-scale Learning to Rank Systems", eq. 1 and 2).
// Plain loops, tiled so that each row of the weight is used for several samples
// while it is in L1. Batch-summed weight gradients run in parallel over the
// weight's rows, each summing the batch in order, so no thread-private partial
// sums are needed and the result is the same for any thread count.

#include "ops/cross_layer.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "core/threads.h"
#include "ops/dense_ops.h"
#include "ops/internal/tensor_checks.h"
#include "ops/internal/vector_math.h"

namespace ember::ops {
namespace {

using internal::Axpy;
using internal::Dot;

// Multiply-adds per parallel chunk.
constexpr int64_t kWorkPerChunk = 1 << 16;
// Samples that share one pass over the weight rows.
constexpr int64_t kSampleTile = 8;

int64_t Grain(int64_t work_per_item) {
  return std::max<int64_t>(1, kWorkPerChunk / std::max<int64_t>(1, work_per_item));
}

// Checks x0[B, d] and xl[B, d]; sets *batch and *dim.
Status CheckActivations(const char* op, const Tensor& x0, const Tensor& xl, int64_t* batch,
                        int64_t* dim) {
  EMBER_RETURN_IF_ERROR(CheckRank(op, "x0", x0, DType::kF32, 2));
  *batch = x0.dim(0);
  *dim = x0.dim(1);
  return CheckTensor(op, "xl", xl, DType::kF32, {*batch, *dim});
}

// Checks u[d, r] and v[d, r]; sets *rank.
Status CheckFactors(const char* op, const Tensor& u, const Tensor& v, int64_t dim, int64_t* rank) {
  EMBER_RETURN_IF_ERROR(CheckRank(op, "u", u, DType::kF32, 2));
  *rank = u.dim(1);
  EMBER_RETURN_IF_ERROR(CheckTensor(op, "u", u, DType::kF32, {dim, *rank}));
  return CheckTensor(op, "v", v, DType::kF32, {dim, *rank});
}

// t[r] = V^T x and z[d] = U t + bias for one sample x[d].
void LowRankAffine(const float* u, const float* v, const float* bias, const float* x, int64_t dim,
                   int64_t rank, float* t, float* z) {
  std::fill(t, t + rank, 0.0f);
  for (int64_t j = 0; j < dim; ++j) Axpy(x[j], v + j * rank, rank, t);
  for (int64_t i = 0; i < dim; ++i) z[i] = bias[i] + Dot(u + i * rank, t, rank);
}

// Checks the optional saved intermediates a forward writes: both of
// (saved_t, saved_z) or neither, saved_t [B, r] (when `rank` >= 0; -1: full
// rank, no t), saved_z [B, d].
Status CheckSavedOutputs(const char* op, Tensor* saved_t, Tensor* saved_z, int64_t batch,
                         int64_t dim, int64_t rank) {
  if (rank >= 0 && (saved_t == nullptr) != (saved_z == nullptr)) {
    return Status::InvalidArgument(op, ": saved_t and saved_z go together (both or neither)");
  }
  if (saved_t != nullptr) {
    EMBER_RETURN_IF_ERROR(CheckOutput(op, "saved_t", saved_t, DType::kF32, {batch, rank}));
  }
  if (saved_z != nullptr) {
    EMBER_RETURN_IF_ERROR(CheckOutput(op, "saved_z", saved_z, DType::kF32, {batch, dim}));
  }
  return Status::OK();
}

// The same for the saved intermediates a backward reads.
Status CheckSavedInputs(const char* op, const Tensor* saved_t, const Tensor* saved_z, int64_t batch,
                        int64_t dim, int64_t rank) {
  if (rank >= 0 && (saved_t == nullptr) != (saved_z == nullptr)) {
    return Status::InvalidArgument(op, ": saved_t and saved_z go together (both or neither)");
  }
  if (saved_t != nullptr) {
    EMBER_RETURN_IF_ERROR(CheckTensor(op, "saved_t", *saved_t, DType::kF32, {batch, rank}));
  }
  if (saved_z != nullptr) {
    EMBER_RETURN_IF_ERROR(CheckTensor(op, "saved_z", *saved_z, DType::kF32, {batch, dim}));
  }
  return Status::OK();
}

// Elements per task of the elementwise loops.
constexpr int64_t kElementGrain = 1 << 14;

}  // namespace

Status CrossLayerForward(const Tensor& x0, const Tensor& xl, const Tensor& weight,
                         const Tensor& bias, Tensor* out, Tensor* saved_z) {
  constexpr const char* kOp = "CrossLayerForward";
  int64_t batch = 0, dim = 0;
  EMBER_RETURN_IF_ERROR(CheckActivations(kOp, x0, xl, &batch, &dim));
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "weight", weight, DType::kF32, {dim, dim}));
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "bias", bias, DType::kF32, {dim}));
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "out", out, DType::kF32, {batch, dim}));
  EMBER_RETURN_IF_ERROR(CheckNoOverlap(
      kOp, {{"out", out}}, {{"x0", &x0}, {"xl", &xl}, {"weight", &weight}, {"bias", &bias}}));
  EMBER_RETURN_IF_ERROR(CheckSavedOutputs(kOp, nullptr, saved_z, batch, dim, -1));
  if (saved_z != nullptr) {
    EMBER_RETURN_IF_ERROR(
        CheckNoOverlap(kOp, {{"out", out}, {"saved_z", saved_z}},
                       {{"x0", &x0}, {"xl", &xl}, {"weight", &weight}, {"bias", &bias}}));
  }
  // z = xl W^T + bias through the fully connected op (a oneDNN SGEMM), then
  // out = x0 * z + xl elementwise.
  Tensor z = saved_z != nullptr ? *saved_z : Tensor::Empty({batch, dim});  // Shares storage.
  EMBER_RETURN_IF_ERROR(FullyConnectedForward(xl, weight, bias, Activation::kNone, &z));
  const float* a = x0.data<float>();
  const float* x = xl.data<float>();
  const float* zz = z.data<float>();
  float* y = out->data<float>();
  ParallelFor(0, batch * dim, kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) y[k] = a[k] * zz[k] + x[k];
  });
  return Status::OK();
}

Status CrossLayerBackward(const Tensor& x0, const Tensor& xl, const Tensor& weight,
                          const Tensor& bias, const Tensor& dout, Tensor* dx0, Tensor* dxl,
                          Tensor* dweight, Tensor* dbias, const Tensor* saved_z) {
  constexpr const char* kOp = "CrossLayerBackward";
  int64_t batch = 0, dim = 0;
  EMBER_RETURN_IF_ERROR(CheckActivations(kOp, x0, xl, &batch, &dim));
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "weight", weight, DType::kF32, {dim, dim}));
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "bias", bias, DType::kF32, {dim}));
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "dout", dout, DType::kF32, {batch, dim}));
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "dx0", dx0, DType::kF32, {batch, dim}));
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "dxl", dxl, DType::kF32, {batch, dim}));
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "dweight", dweight, DType::kF32, {dim, dim}));
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "dbias", dbias, DType::kF32, {dim}));
  EMBER_RETURN_IF_ERROR(CheckNoOverlap(
      kOp, {{"dx0", dx0}, {"dxl", dxl}, {"dweight", dweight}, {"dbias", dbias}},
      {{"x0", &x0}, {"xl", &xl}, {"weight", &weight}, {"bias", &bias}, {"dout", &dout}}));
  EMBER_RETURN_IF_ERROR(CheckSavedInputs(kOp, nullptr, saved_z, batch, dim, -1));
  if (saved_z != nullptr) {
    EMBER_RETURN_IF_ERROR(
        CheckNoOverlap(kOp, {{"dx0", dx0}, {"dxl", dxl}, {"dweight", dweight}, {"dbias", dbias}},
                       {{"saved_z", saved_z}}));
  }
  // With z = xl W^T + bias and g = dout * x0: dx0 = dout * z, and the inner
  // product's backward of g gives dxl - dout = g W, dweight = g^T xl and
  // dbias = sum_b g, in oneDNN's fixed reduction order.
  Tensor z;
  if (saved_z != nullptr) {
    z = *saved_z;
  } else {
    z = Tensor::Empty({batch, dim});
    EMBER_RETURN_IF_ERROR(FullyConnectedForward(xl, weight, bias, Activation::kNone, &z));
  }
  Tensor gx0 = Tensor::Empty({batch, dim});
  const float* a = x0.data<float>();
  const float* g = dout.data<float>();
  const float* zz = z.data<float>();
  float* gg = gx0.data<float>();
  float* da = dx0->data<float>();
  ParallelFor(0, batch * dim, kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      da[k] = g[k] * zz[k];
      gg[k] = g[k] * a[k];
    }
  });
  EMBER_RETURN_IF_ERROR(
      FullyConnectedBackward(xl, weight, z, gx0, Activation::kNone, dxl, dweight, dbias));
  float* dx = dxl->data<float>();
  ParallelFor(0, batch * dim, kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) dx[k] += g[k];
  });
  return Status::OK();
}

Status LowRankCrossLayerForward(const Tensor& x0, const Tensor& xl, const Tensor& u,
                                const Tensor& v, const Tensor& bias, Tensor* out, Tensor* saved_t,
                                Tensor* saved_z) {
  constexpr const char* kOp = "LowRankCrossLayerForward";
  int64_t batch = 0, dim = 0, rank = 0;
  EMBER_RETURN_IF_ERROR(CheckActivations(kOp, x0, xl, &batch, &dim));
  EMBER_RETURN_IF_ERROR(CheckFactors(kOp, u, v, dim, &rank));
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "bias", bias, DType::kF32, {dim}));
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "out", out, DType::kF32, {batch, dim}));
  EMBER_RETURN_IF_ERROR(CheckNoOverlap(
      kOp, {{"out", out}}, {{"x0", &x0}, {"xl", &xl}, {"u", &u}, {"v", &v}, {"bias", &bias}}));
  EMBER_RETURN_IF_ERROR(CheckSavedOutputs(kOp, saved_t, saved_z, batch, dim, rank));
  const bool save = saved_t != nullptr;
  if (save) {
    EMBER_RETURN_IF_ERROR(
        CheckNoOverlap(kOp, {{"out", out}, {"saved_t", saved_t}, {"saved_z", saved_z}},
                       {{"x0", &x0}, {"xl", &xl}, {"u", &u}, {"v", &v}, {"bias", &bias}}));
  }
  const float* a = x0.data<float>();
  const float* x = xl.data<float>();
  const float* pu = u.data<float>();
  const float* pv = v.data<float>();
  const float* c = bias.data<float>();
  float* y = out->data<float>();
  float* st = save ? saved_t->data<float>() : nullptr;
  float* sz = save ? saved_z->data<float>() : nullptr;
  ParallelFor(0, batch, Grain(2 * dim * rank), [&](int64_t begin, int64_t end) {
    // Per-sample t and z: into the saved tensors, else into a buffer per task.
    std::vector<float> t(save ? 0 : static_cast<size_t>(rank)),
        z(save ? 0 : static_cast<size_t>(dim));
    for (int64_t b = begin; b < end; ++b) {
      float* tb = save ? st + b * rank : t.data();
      float* zb = save ? sz + b * dim : z.data();
      LowRankAffine(pu, pv, c, x + b * dim, dim, rank, tb, zb);
      for (int64_t i = 0; i < dim; ++i) y[b * dim + i] = a[b * dim + i] * zb[i] + x[b * dim + i];
    }
  });
  return Status::OK();
}

Status LowRankCrossLayerBackward(const Tensor& x0, const Tensor& xl, const Tensor& u,
                                 const Tensor& v, const Tensor& bias, const Tensor& dout,
                                 Tensor* dx0, Tensor* dxl, Tensor* du, Tensor* dv, Tensor* dbias,
                                 const Tensor* saved_t, const Tensor* saved_z) {
  constexpr const char* kOp = "LowRankCrossLayerBackward";
  int64_t batch = 0, dim = 0, rank = 0;
  EMBER_RETURN_IF_ERROR(CheckActivations(kOp, x0, xl, &batch, &dim));
  EMBER_RETURN_IF_ERROR(CheckFactors(kOp, u, v, dim, &rank));
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "bias", bias, DType::kF32, {dim}));
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "dout", dout, DType::kF32, {batch, dim}));
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "dx0", dx0, DType::kF32, {batch, dim}));
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "dxl", dxl, DType::kF32, {batch, dim}));
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "du", du, DType::kF32, {dim, rank}));
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "dv", dv, DType::kF32, {dim, rank}));
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "dbias", dbias, DType::kF32, {dim}));
  EMBER_RETURN_IF_ERROR(CheckNoOverlap(
      kOp, {{"dx0", dx0}, {"dxl", dxl}, {"du", du}, {"dv", dv}, {"dbias", dbias}},
      {{"x0", &x0}, {"xl", &xl}, {"u", &u}, {"v", &v}, {"bias", &bias}, {"dout", &dout}}));
  EMBER_RETURN_IF_ERROR(CheckSavedInputs(kOp, saved_t, saved_z, batch, dim, rank));
  const bool saved = saved_t != nullptr;
  if (saved) {
    EMBER_RETURN_IF_ERROR(
        CheckNoOverlap(kOp, {{"dx0", dx0}, {"dxl", dxl}, {"du", du}, {"dv", dv}, {"dbias", dbias}},
                       {{"saved_t", saved_t}, {"saved_z", saved_z}}));
  }
  const float* a = x0.data<float>();
  const float* x = xl.data<float>();
  const float* pu = u.data<float>();
  const float* pv = v.data<float>();
  const float* c = bias.data<float>();
  const float* g = dout.data<float>();
  float* da = dx0->data<float>();
  float* dx = dxl->data<float>();
  float* pdu = du->data<float>();
  float* pdv = dv->data<float>();
  float* dc = dbias->data<float>();
  // t[b] = V^T x_l[b] (saved by the forward, or recomputed into
  // recomputed_t) and dt[b] = U^T (dout ⊙ x0)[b], kept for du and dv.
  std::vector<float> recomputed_t(saved ? 0 : static_cast<size_t>(batch * rank));
  std::vector<float> dt(static_cast<size_t>(batch * rank));
  const float* t = saved ? saved_t->data<float>() : recomputed_t.data();
  const float* sz = saved ? saved_z->data<float>() : nullptr;
  ParallelFor(0, batch, Grain((saved ? 2 : 4) * dim * rank), [&](int64_t begin, int64_t end) {
    std::vector<float> z(saved ? 0 : static_cast<size_t>(dim));
    for (int64_t b = begin; b < end; ++b) {
      const int64_t row = b * dim;
      const float* zb = saved ? sz + row : z.data();
      if (!saved) {
        LowRankAffine(pu, pv, c, x + row, dim, rank, recomputed_t.data() + b * rank, z.data());
      }
      float* dtb = dt.data() + b * rank;
      std::fill(dtb, dtb + rank, 0.0f);
      for (int64_t i = 0; i < dim; ++i) {
        da[row + i] = g[row + i] * zb[i];
        Axpy(g[row + i] * a[row + i], pu + i * rank, rank, dtb);
      }
      for (int64_t j = 0; j < dim; ++j) dx[row + j] = g[row + j] + Dot(pv + j * rank, dtb, rank);
    }
  });
  // du[i, :] = sum_b g[b, i] t[b], dv[i, :] = sum_b x_l[b, i] dt[b], dbias[i] = sum_b g[b, i].
  ParallelFor(0, dim, Grain(2 * batch * rank), [&](int64_t begin, int64_t end) {
    std::fill(pdu + begin * rank, pdu + end * rank, 0.0f);
    std::fill(pdv + begin * rank, pdv + end * rank, 0.0f);
    std::fill(dc + begin, dc + end, 0.0f);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t i = begin; i < end; ++i) {
        const float gi = g[b * dim + i] * a[b * dim + i];
        dc[i] += gi;
        Axpy(gi, t + b * rank, rank, pdu + i * rank);
        Axpy(x[b * dim + i], dt.data() + b * rank, rank, pdv + i * rank);
      }
    }
  });
  return Status::OK();
}

OpCost CrossLayerForwardCost(int64_t batch, int64_t dim) {
  const double b = static_cast<double>(batch), d = static_cast<double>(dim);
  return OpCost{.flops = b * (2.0 * d * d + 3.0 * d), .bytes = 4.0 * (4.0 * b * d + d * d + d)};
}

OpCost CrossLayerBackwardCost(int64_t batch, int64_t dim) {
  const double b = static_cast<double>(batch), d = static_cast<double>(dim);
  return OpCost{.flops = b * (4.0 * d * d + 4.0 * d),
                .bytes = 4.0 * (6.0 * b * d + 2.0 * d * d + d)};
}

OpCost LowRankCrossLayerForwardCost(int64_t batch, int64_t dim, int64_t rank) {
  const double b = static_cast<double>(batch), d = static_cast<double>(dim),
               r = static_cast<double>(rank);
  return OpCost{.flops = b * (4.0 * d * r + 3.0 * d),
                .bytes = 4.0 * (4.0 * b * d + b * r + 2.0 * d * r + d)};
}

OpCost LowRankCrossLayerBackwardCost(int64_t batch, int64_t dim, int64_t rank) {
  const double b = static_cast<double>(batch), d = static_cast<double>(dim),
               r = static_cast<double>(rank);
  return OpCost{.flops = b * (8.0 * d * r + 4.0 * d),
                .bytes = 4.0 * (6.0 * b * d + b * r + 4.0 * d * r + d)};
}

}  // namespace ember::ops
