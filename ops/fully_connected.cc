// Fully connected layer as three row-major dnnl_sgemm calls (y = x W^T,
// dW = g^T x, dx = g W) around one fused elementwise pass each way: bias and
// ReLU after the forward product; before the backward products, the ReLU mask
// of dy together with the bias gradient (its column sums).
//
// This replaced oneDNN inner-product primitives (a forward with a ReLU
// post-op, backward-data, backward-weights with diff_bias). Most of their gap
// to the bare GEMMs was not theirs but the hand-written ReLU mask, a branch per
// element (see ActivationGradientAndBiasSums); with it fixed they reached
// 0.90 / 0.84 / 0.90 of the three bare SGEMMs at batch 2048 and 512->256,
// 256->64, 479->512 on 2 threads, against 0.91 / 0.87 / 0.92 here
// (tools/bench/dense_bench, paired ratio, medians of three runs), and there
// is no per-shape primitive to build (a JIT of ~25 ms on first use) or cache.
//
// The elementwise passes run in parallel over blocks of rows (ParallelFor, in
// the caller's arena). They first ran on the calling thread, over data the
// GEMM had just written: that kept the isolated layer near the bare GEMMs but
// left a serial pass of every layer's whole output in each direction, and the
// DLRM step on 2 threads scaled only 1.60x over 1 thread. In parallel:
// 2048/13/512 0.51 -> 0.72 of the bare GEMMs, 512->256 0.92 -> 0.94, 367->512
// 0.88 -> 0.93 (paired ratios, 2 threads), and the DLRM training step of
// tools/bench/suite.py on 2 threads 34.1 -> 32.2 ms.
//
// Thread safety: every function may be called concurrently from several
// threads, and from inside another's parallel loop. dnnl_sgemm keeps no state
// between calls; the masked gradient and the bias gradient's partial sums are
// each call's own tensors, from the caching host allocator.
//
// Determinism: results are a function of the inputs and the OpenMP thread
// count. The elementwise passes and the bias gradient do not depend on the
// thread count: the bias gradient is summed row by row within blocks of a
// fixed number of rows (RowBlock), and the blocks' sums are added in block
// order. The products are oneDNN's, which may split dW's batch dimension
// differently for different counts (it does at 8 threads for batch 2048, as
// the inner-product primitives did).

#include "ops/dense_ops.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include <oneapi/dnnl/dnnl.h>

#include "core/allocator.h"
#include "core/threads.h"
#include "ops/internal/tensor_checks.h"

namespace ember::ops {
namespace {


// c[m, n] = a[m, k] (transposed if transa = 'T') * b[k, n] (likewise), all
// row-major with leading dimensions of their stored shapes.
Status Sgemm(const char* op, char transa, char transb, int64_t m, int64_t n, int64_t k,
             const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  const dnnl_status_t status =
      dnnl_sgemm(transa, transb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
  if (status != dnnl_success) {
    return Status::Internal(op, ": dnnl_sgemm(", transa, transb, ", m=", m, ", n=", n, ", k=", k,
                            ") failed (dnnl_status_t ", static_cast<int>(status), ")");
  }
  return Status::OK();
}

// Rows per block of the elementwise passes: about 16K elements, so that a
// block is worth a task, but at least 64 rows, so that adding the blocks'
// partial bias sums (blocks x out, serial) stays a 64th of the pass even for
// wide layers. A fixed number whatever the thread count, so that the bias
// gradient does not depend on it.
int64_t RowBlock(int64_t out) {
  return std::max<int64_t>(64, (int64_t{1} << 14) / std::max<int64_t>(out, 1));
}

// y = act(y + bias) for every row of y[batch, out].
void AddBiasAndActivate(const float* bias, Activation activation, int64_t batch, int64_t out,
                        float* y) {
  ParallelFor(0, batch, RowBlock(out), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* row = y + r * out;
      if (activation == Activation::kRelu) {
        for (int64_t o = 0; o < out; ++o) row[o] = std::max(row[o] + bias[o], 0.0f);
      } else {
        for (int64_t o = 0; o < out; ++o) row[o] += bias[o];
      }
    }
  });
}

Status CheckForwardArguments(const char* op, const Tensor& x, const Tensor& weight,
                             const Tensor& bias) {
  EMBER_RETURN_IF_ERROR(CheckRank(op, "x", x, DType::kF32, 2));
  EMBER_RETURN_IF_ERROR(CheckRank(op, "weight", weight, DType::kF32, 2));
  EMBER_RETURN_IF_ERROR(CheckTensor(op, "weight", weight, DType::kF32, {weight.dim(0), x.dim(1)}));
  return CheckTensor(op, "bias", bias, DType::kF32, {weight.dim(0)});
}

}  // namespace

Status FullyConnectedForward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                             Activation activation, Tensor* y) {
  constexpr const char* kOp = "FullyConnectedForward";
  EMBER_RETURN_IF_ERROR(CheckForwardArguments(kOp, x, weight, bias));
  const int64_t batch = x.dim(0), in = x.dim(1), out = weight.dim(0);
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "y", y, DType::kF32, {batch, out}));
  if (batch == 0 || out == 0) return Status::OK();
  if (in == 0) {
    y->SetZero();  // a product over an empty dimension; oneDNN is not asked for it
  } else {
    EMBER_RETURN_IF_ERROR(Sgemm(kOp, 'N', 'T', batch, out, in, x.data<float>(), in,
                                weight.data<float>(), in, y->data<float>(), out));
  }
  AddBiasAndActivate(bias.data<float>(), activation, batch, out, y->data<float>());
  return Status::OK();
}

namespace {

// A host tensor from the process's caching allocator: a step's scratch of the
// same size as the last step's reuses its block, without page faults.
Result<Tensor> Scratch(std::vector<int64_t> shape) {
  return Tensor::Allocate(std::move(shape), DType::kF32, Device::Cpu(), CpuAllocator());
}

// dbias = column sums of the gradient through the activation, summed row by
// row within blocks of RowBlock rows, then block by block in order. For ReLU
// the gradient dy * (y > 0) is written to *masked (allocated here, held by
// the caller for the products) and returned; otherwise dy itself is returned.
// One parallel pass over dy either way.
Result<const float*> ActivationGradientAndBiasSums(const Tensor& y, const Tensor& dy,
                                                   Activation activation, int64_t batch,
                                                   int64_t out, Tensor* masked_tensor,
                                                   Tensor* dbias) {
  float* db = dbias->data<float>();
  if (out > 0) std::memset(db, 0, static_cast<size_t>(out) * sizeof(float));
  const float* g = dy.data<float>();
  if (batch == 0 || out == 0) return g;
  const bool relu = activation == Activation::kRelu;
  const int64_t block = RowBlock(out);
  const int64_t blocks = (batch + block - 1) / block;
  float* masked = nullptr;
  if (relu) {
    EMBER_ASSIGN_OR_RETURN(*masked_tensor, Scratch({batch, out}));
    masked = masked_tensor->data<float>();
  }
  EMBER_ASSIGN_OR_RETURN(Tensor partial_tensor, Scratch({blocks, out}));
  float* partial = partial_tensor.data<float>();
  const float* yv = y.data<float>();
  ParallelFor(0, blocks, 1, [&](int64_t first, int64_t last) {
    for (int64_t k = first; k < last; ++k) {
      float* sums = partial + k * out;
      std::fill(sums, sums + out, 0.0f);
      const int64_t end = std::min(batch, (k + 1) * block);
      for (int64_t r = k * block; r < end; ++r) {
        if (relu) {
          for (int64_t o = 0; o < out; ++o) {
            const float grad = g[r * out + o];
            const float v = yv[r * out + o] > 0.0f ? grad : 0.0f;
            masked[r * out + o] = v;
            sums[o] += v;
          }
        } else {
          for (int64_t o = 0; o < out; ++o) sums[o] += g[r * out + o];
        }
      }
    }
  });
  for (int64_t k = 0; k < blocks; ++k) {
    for (int64_t o = 0; o < out; ++o) db[o] += partial[k * out + o];
  }
  return relu ? masked : g;
}

}  // namespace

Status FullyConnectedBackward(const Tensor& x, const Tensor& weight, const Tensor& y,
                              const Tensor& dy, Activation activation, Tensor* dx, Tensor* dweight,
                              Tensor* dbias) {
  constexpr const char* kOp = "FullyConnectedBackward";
  EMBER_RETURN_IF_ERROR(CheckRank(kOp, "x", x, DType::kF32, 2));
  EMBER_RETURN_IF_ERROR(CheckRank(kOp, "weight", weight, DType::kF32, 2));
  const int64_t batch = x.dim(0), in = x.dim(1), out = weight.dim(0);
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "weight", weight, DType::kF32, {out, in}));
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "y", y, DType::kF32, {batch, out}));
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "dy", dy, DType::kF32, {batch, out}));
  if (dx != nullptr) EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "dx", dx, DType::kF32, {batch, in}));
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "dweight", dweight, DType::kF32, {out, in}));
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "dbias", dbias, DType::kF32, {out}));

  Tensor masked;
  Result<const float*> grad =
      ActivationGradientAndBiasSums(y, dy, activation, batch, out, &masked, dbias);
  if (!grad.ok()) return grad.status().WithContext(kOp);
  if (batch == 0 || out == 0 || in == 0) {
    // Products over an empty dimension are zero; oneDNN is not asked for them.
    dweight->SetZero();
    if (dx != nullptr) dx->SetZero();
    return Status::OK();
  }
  EMBER_RETURN_IF_ERROR(Sgemm(kOp, 'T', 'N', out, in, batch, *grad, out, x.data<float>(), in,
                              dweight->data<float>(), in));
  if (dx != nullptr) {
    EMBER_RETURN_IF_ERROR(Sgemm(kOp, 'N', 'N', batch, in, out, *grad, out, weight.data<float>(), in,
                                dx->data<float>(), in));
  }
  return Status::OK();
}

}  // namespace ember::ops
