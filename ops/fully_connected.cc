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
// (tools/bench/dense_bench, paired ratio, medians of three runs). Here the
// step has the three parallel regions of the bare GEMMs and no others (the
// primitives add one for the post-ops and one for the bias reduction), the
// elementwise passes run on the calling thread over data the GEMM has just
// written, and there is no per-shape primitive to build (a JIT of ~25 ms on
// first use) or cache.
//
// Thread safety: every function may be called concurrently from several
// threads. dnnl_sgemm keeps no state between calls; the masked gradient lives
// in a buffer of the calling thread.
//
// Determinism: results are a function of the inputs and the OpenMP thread
// count. The elementwise passes and the bias gradient (summed row by row in
// order) do not depend on the thread count; the products are oneDNN's, which
// may split dW's batch dimension differently for different counts (it does at
// 8 threads for batch 2048, as the inner-product primitives did).

#include "ops/dense_ops.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>

#include <oneapi/dnnl/dnnl.h>

#include "ops/internal/tensor_checks.h"

namespace ember::ops {
namespace {

// A 64-byte-aligned byte buffer that only grows; one per thread.
class ScratchBuffer {
 public:
  void* Get(size_t bytes) {
    if (bytes > capacity_) {
      storage_.reset(new (std::align_val_t{64}) uint8_t[bytes]);
      capacity_ = bytes;
    }
    return storage_.get();
  }

 private:
  struct AlignedDelete {
    void operator()(uint8_t* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::unique_ptr<uint8_t[], AlignedDelete> storage_;
  size_t capacity_ = 0;
};

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

// y = act(y + bias) for every row of y[batch, out].
void AddBiasAndActivate(const float* bias, Activation activation, int64_t batch, int64_t out,
                        float* y) {
  for (int64_t r = 0; r < batch; ++r) {
    float* row = y + r * out;
    if (activation == Activation::kRelu) {
      for (int64_t o = 0; o < out; ++o) row[o] = std::max(row[o] + bias[o], 0.0f);
    } else {
      for (int64_t o = 0; o < out; ++o) row[o] += bias[o];
    }
  }
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

// dbias = column sums of the gradient through the activation, summed row by
// row in order. For ReLU the gradient dy * (y > 0) is written to a buffer of
// the calling thread and returned; otherwise dy itself is returned. One pass
// over dy either way.
const float* ActivationGradientAndBiasSums(const Tensor& y, const Tensor& dy, Activation activation,
                                           int64_t batch, int64_t out, Tensor* dbias) {
  float* db = dbias->data<float>();
  if (out > 0) std::memset(db, 0, static_cast<size_t>(out) * sizeof(float));
  const float* g = dy.data<float>();
  if (activation != Activation::kRelu) {
    for (int64_t r = 0; r < batch; ++r) {
      for (int64_t o = 0; o < out; ++o) db[o] += g[r * out + o];
    }
    return g;
  }
  thread_local ScratchBuffer buffer;
  float* masked = static_cast<float*>(buffer.Get(static_cast<size_t>(batch * out) * sizeof(float)));
  const float* yv = y.data<float>();
  for (int64_t r = 0; r < batch; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      // Both operands are loaded unconditionally so that the select
      // vectorizes; a load of g under the condition compiles to a branch that
      // mispredicts on half of the elements (it took longer than one of the
      // three GEMMs at batch 2048, 512 -> 256).
      const float grad = g[r * out + o];
      const float v = yv[r * out + o] > 0.0f ? grad : 0.0f;
      masked[r * out + o] = v;
      db[o] += v;
    }
  }
  return masked;
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

  try {
    const float* grad = ActivationGradientAndBiasSums(y, dy, activation, batch, out, dbias);
    if (batch == 0 || out == 0 || in == 0) {
      // Products over an empty dimension are zero; oneDNN is not asked for them.
      dweight->SetZero();
      if (dx != nullptr) dx->SetZero();
      return Status::OK();
    }
    EMBER_RETURN_IF_ERROR(Sgemm(kOp, 'T', 'N', out, in, batch, grad, out, x.data<float>(), in,
                                dweight->data<float>(), in));
    if (dx != nullptr) {
      EMBER_RETURN_IF_ERROR(Sgemm(kOp, 'N', 'N', batch, in, out, grad, out, weight.data<float>(),
                                  in, dx->data<float>(), in));
    }
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted(kOp, ": out of host memory");
  }
  return Status::OK();
}

}  // namespace ember::ops
