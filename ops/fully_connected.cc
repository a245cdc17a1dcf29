// Fully connected layer as three row-major products (y = x W^T, dW = g^T x,
// dx = g W): the forward one a oneDNN f32 matmul primitive that adds the bias
// and applies ReLU in its epilogue (ops/internal/matmul.h), the backward ones
// dnnl_sgemm calls after one fused elementwise pass over dy: the ReLU mask of
// dy together with the bias gradient (its column sums). Layers narrow on
// one side do some products inside those passes instead
// (ops/internal/fully_connected_narrow.h): the forward of a layer with at most
// 16 inputs, the backward of one with at most 16 outputs. In the DLRM step of
// tools/bench/suite.py on 2 threads: 13->512 forward 1.0 -> 0.29 ms, the
// backward of 64->16 0.30 -> 0.19 ms and of 256->1 0.35 -> 0.23 ms.
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
// The forward was a dnnl_sgemm and a parallel pass adding the bias and
// applying ReLU. The matmul primitive does both while each block of y is in
// registers, and its brgemm kernels run the forward shapes a little faster
// than dnnl_sgemm: DLRM's five wide layers (512->256, 256->64, 64->16,
// 367->512, 512->256) forward on one row shard (1024 rows, one thread) 6.59
// -> 5.90 ms; the DLRM step of tools/bench/suite.py on 2 threads +2.0%
// samples/s (6 alternating pairs, all faster). The backward products stay
// dnnl_sgemm: the matmul primitive is slower at dx = g W for 367->512 (0.91x)
// and at dW for 256->64 (0.96x), and no faster overall.
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
// With ComputePrecision::kBf16 the products are oneDNN bf16 matmuls
// (ops/internal/matmul.h; AMX here): x, the weights and the gradient
// through the activation are rounded to bf16 before each product, in passes
// of their own (ToBf16). The narrow kernels stay f32. DLRM at batch 2048 on 2
// threads: 62k -> 95k samples/s. The rounding passes read cold activations
// and take about half as long as the products; rounding the gradient inside
// the pass over dy instead was no faster (0.999 in 4 alternating pairs).
// Given Bf16Copies (the graph executor keeps them), x and the weight are
// rounded once for the forward and the backward, and y in the bias pass for
// the next layer (+1.8% on that DLRM step; ops/graph_executor.h).
//
// Thread safety: every function may be called concurrently from several
// threads, and from inside another's parallel loop. dnnl_sgemm keeps no state
// between calls, the cached matmul primitives run on each call's own
// scratchpad; the masked gradient and the bias gradient's partial sums are
// each call's own tensors, from the caching host allocator.
//
// Determinism: results are a function of the inputs and the OpenMP thread
// count. The elementwise passes, the narrow kernels and the bias gradient do
// not depend on the thread count: the bias gradient is summed row by row
// within blocks of a fixed number of rows (RowBlock), and the blocks' sums
// are added in block order. The products are oneDNN's, which may split dW's batch dimension
// differently for different counts (it does at 8 threads for batch 2048, as
// the inner-product primitives did).

#include "ops/dense_ops.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include <oneapi/dnnl/dnnl.h>

#include "core/allocator.h"
#include "core/simd.h"
#include "core/threads.h"
#include "ops/internal/matmul.h"
#include "ops/internal/fully_connected_narrow.h"
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

// The precisions the CPU kernels compute in: f32, and bf16 where the CPU
// multiplies it in hardware.
Status CheckCpuPrecision(const char* op, ComputePrecision precision) {
  if (precision == ComputePrecision::kF32) return Status::OK();
  if (precision == ComputePrecision::kBf16) {
    if (internal::CpuHasBf16()) return Status::OK();
    return Status::FailedPrecondition(op, ": ", internal::kNoBf16Products);
  }
  return Status::InvalidArgument(op, ": the CPU kernels compute in f32 or bf16, not ",
                                 ComputePrecisionName(precision));
}

// A host tensor from the process's caching allocator: a step's scratch of the
// same size as the last step's reuses its block, without page faults.
Result<Tensor> Scratch(std::vector<int64_t> shape) {
  return Tensor::Allocate(std::move(shape), DType::kF32, Device::Cpu(), CpuAllocator());
}

// Rows per block of the elementwise passes: about 16K elements, so that a
// block is worth a task, but at least 64 rows, so that adding the blocks'
// partial bias sums (blocks x out, serial) stays a 64th of the pass even for
// wide layers. A fixed number whatever the thread count, so that the bias
// gradient does not depend on it.
int64_t RowBlock(int64_t out) {
  return std::max<int64_t>(64, (int64_t{1} << 14) / std::max<int64_t>(out, 1));
}

// src[rows, cols] (row-major) rounded to bf16, in a tensor from the caching
// allocator; converted in parallel blocks of rows.
Result<Tensor> ToBf16(const float* src, int64_t rows, int64_t cols) {
  EMBER_ASSIGN_OR_RETURN(Tensor converted, Tensor::Allocate({rows, cols}, DType::kBF16,
                                                            Device::Cpu(), CpuAllocator()));
  BFloat16* dst = converted.data<BFloat16>();
  ParallelFor(0, rows, RowBlock(cols), [&](int64_t begin, int64_t end) {
    FloatsToBFloat16(src + begin * cols, (end - begin) * cols, dst + begin * cols);
  });
  return converted;
}

// The bf16 rounding of src[rows, cols] (`what` names it in errors): the one
// `copy` holds, or, when copy is null or undefined, a new one (kept in *copy
// when there is one, else in *local).
Result<const BFloat16*> Rounded(const char* what, const float* src, int64_t rows, int64_t cols,
                                Tensor* copy, Tensor* local) {
  if (copy != nullptr && copy->defined()) {
    if (copy->dtype() != DType::kBF16 || copy->ndim() != 2 || copy->dim(0) != rows ||
        copy->dim(1) != cols) {
      return Status::InvalidArgument("the bf16 copy of ", what, " is ", copy->DebugString(),
                                     ", expected bf16[", rows, ", ", cols, "]");
    }
    return copy->data<BFloat16>();
  }
  Tensor* target = copy != nullptr ? copy : local;
  EMBER_ASSIGN_OR_RETURN(*target, ToBf16(src, rows, cols));
  return target->data<BFloat16>();
}

// A new bf16 [rows, cols] tensor in *copy for a kernel to fill, or null when
// there is no copy to fill (null or already held).
Result<BFloat16*> CopyToFill(Tensor* copy, int64_t rows, int64_t cols) {
  if (copy == nullptr || copy->defined()) return nullptr;
  EMBER_ASSIGN_OR_RETURN(
      *copy, Tensor::Allocate({rows, cols}, DType::kBF16, Device::Cpu(), CpuAllocator()));
  return copy->data<BFloat16>();
}

// y = act(y + bias) for rows [begin, end) of y[batch, out], and when
// `rounded` is not null, rounded = y rounded to bf16 (each row while it is in
// L1). Compiled per ISA level (core/simd.h); elementwise, the same bits on
// every copy.
EMBER_MULTIVERSIONED
void BiasAndActivateRows(const float* bias, bool relu, int64_t begin, int64_t end, int64_t out,
                         float* y, BFloat16* rounded) {
  for (int64_t r = begin; r < end; ++r) {
    float* row = y + r * out;
    if (relu) {
      for (int64_t o = 0; o < out; ++o) row[o] = std::max(row[o] + bias[o], 0.0f);
    } else {
      for (int64_t o = 0; o < out; ++o) row[o] += bias[o];
    }
    if (rounded != nullptr) FloatsToBFloat16(row, out, rounded + r * out);
  }
}

// y = act(y + bias) for every row of y[batch, out], and its bf16 rounding
// when `rounded` is not null.
void AddBiasAndActivate(const float* bias, Activation activation, int64_t batch, int64_t out,
                        float* y, BFloat16* rounded) {
  const bool relu = activation == Activation::kRelu;
  ParallelFor(0, batch, RowBlock(out), [&](int64_t begin, int64_t end) {
    BiasAndActivateRows(bias, relu, begin, end, out, y, rounded);
  });
}

Status CheckForwardArguments(const char* op, const Tensor& x, const Tensor& weight,
                             const Tensor& bias) {
  EMBER_RETURN_IF_ERROR(CheckRank(op, "x", x, DType::kF32, 2));
  EMBER_RETURN_IF_ERROR(CheckRank(op, "weight", weight, DType::kF32, 2));
  EMBER_RETURN_IF_ERROR(CheckTensor(op, "weight", weight, DType::kF32, {weight.dim(0), x.dim(1)}));
  return CheckTensor(op, "bias", bias, DType::kF32, {weight.dim(0)});
}

// FullyConnectedForward for in <= kNarrowWidth: the products and the bias and
// activation in one parallel pass over y.
Status NarrowInputForward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                          Activation activation, Tensor* y, BFloat16* rounded) {
  const int64_t batch = x.dim(0), in = x.dim(1), out = weight.dim(0);
  EMBER_ASSIGN_OR_RETURN(Tensor transposed, Scratch({in, out}));
  const float* w = weight.data<float>();
  float* wt = transposed.data<float>();
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t k = 0; k < in; ++k) wt[k * out + o] = w[o * in + k];
  }
  const float* xv = x.data<float>();
  const float* b = bias.data<float>();
  float* yv = y->data<float>();
  const bool relu = activation == Activation::kRelu;
  ParallelFor(0, batch, RowBlock(out), [&](int64_t begin, int64_t end) {
    internal::NarrowInputForwardRows(xv, wt, b, relu, begin, end, in, out, yv);
    if (rounded != nullptr) {
      FloatsToBFloat16(yv + begin * out, (end - begin) * out, rounded + begin * out);
    }
  });
  return Status::OK();
}

}  // namespace

Status FullyConnectedForward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                             Activation activation, Tensor* y, ComputePrecision precision,
                             const Bf16Copies& copies) {
  constexpr const char* kOp = "FullyConnectedForward";
  EMBER_RETURN_IF_ERROR(CheckCpuPrecision(kOp, precision));
  EMBER_RETURN_IF_ERROR(CheckForwardArguments(kOp, x, weight, bias));
  const int64_t batch = x.dim(0), in = x.dim(1), out = weight.dim(0);
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "y", y, DType::kF32, {batch, out}));
  const bool bf16 = precision == ComputePrecision::kBf16;
  Result<BFloat16*> y_copy = CopyToFill(bf16 ? copies.y : nullptr, batch, out);
  if (!y_copy.ok()) return y_copy.status().WithContext(kOp);
  if (batch == 0 || out == 0) return Status::OK();
  if (in == 0) {
    y->SetZero();  // a product over an empty dimension; oneDNN is not asked for it
  } else if (internal::IsNarrowInput(in)) {
    return NarrowInputForward(x, weight, bias, activation, y, *y_copy).WithContext(kOp);
  } else if (bf16) {
    Tensor x_local, w_local;
    Result<const BFloat16*> xb = Rounded("x", x.data<float>(), batch, in, copies.x, &x_local);
    if (!xb.ok()) return xb.status().WithContext(kOp);
    Result<const BFloat16*> wb =
        Rounded("weight", weight.data<float>(), out, in, copies.weight, &w_local);
    if (!wb.ok()) return wb.status().WithContext(kOp);
    EMBER_RETURN_IF_ERROR(
        internal::Bf16Gemm(kOp, 'N', 'T', batch, out, in, *xb, in, *wb, in, y->data<float>(), out));
  } else {
    return internal::F32LinearForward(kOp, batch, out, in, x.data<float>(), weight.data<float>(),
                                      bias.data<float>(), activation == Activation::kRelu,
                                      y->data<float>());
  }
  AddBiasAndActivate(bias.data<float>(), activation, batch, out, y->data<float>(), *y_copy);
  return Status::OK();
}

namespace {

// Called for each block of rows [begin, end) (block number `index`) with g,
// the whole gradient through the activation, once the block's rows of g are
// final; from the task that computed them, while they are in its cache.
using BlockHook = std::function<void(int64_t index, int64_t begin, int64_t end, const float* g)>;

// sums[o] += g'[r, o] for rows r of [begin, end) in order, where g' is g, or
// for ReLU g * (y > 0), which is also written to masked. Compiled per ISA
// level (core/simd.h); elementwise, the same bits on every copy.
EMBER_MULTIVERSIONED
void MaskAndSumRows(const float* g, const float* y, bool relu, int64_t begin, int64_t end,
                    int64_t out, float* masked, float* sums) {
  for (int64_t r = begin; r < end; ++r) {
    if (relu) {
      for (int64_t o = 0; o < out; ++o) {
        const float v = y[r * out + o] > 0.0f ? g[r * out + o] : 0.0f;
        masked[r * out + o] = v;
        sums[o] += v;
      }
    } else {
      for (int64_t o = 0; o < out; ++o) sums[o] += g[r * out + o];
    }
  }
}

// dbias = column sums of the gradient through the activation, summed row by
// row within blocks of `block` rows, then block by block in order. For ReLU
// the gradient dy * (y > 0) is written over dy when `in_place`, else to
// *masked (allocated here, held by the caller for the products), and
// returned; otherwise dy itself is returned. One parallel pass over dy
// either way, which runs `after_block` (when set) on each block.
Result<const float*> ActivationGradientAndBiasSums(const Tensor& y, const Tensor& dy,
                                                   Activation activation, int64_t batch,
                                                   int64_t out, int64_t block,
                                                   const BlockHook& after_block, bool in_place,
                                                   Tensor* masked_tensor, Tensor* dbias) {
  float* db = dbias != nullptr ? dbias->data<float>() : nullptr;
  if (db != nullptr && out > 0) std::memset(db, 0, static_cast<size_t>(out) * sizeof(float));
  const float* g = dy.data<float>();
  if (batch == 0 || out == 0) return g;
  const bool relu = activation == Activation::kRelu;
  const int64_t blocks = (batch + block - 1) / block;
  float* masked = nullptr;
  if (relu && in_place) {
    // Each element is read before it is written, by the same thread: the
    // same values as through scratch, without its traffic (+2% samples/s on
    // the suite's DLRM 2-thread case).
    masked = dy.data<float>();
  } else if (relu) {
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
      const int64_t begin = k * block, end = std::min(batch, (k + 1) * block);
      MaskAndSumRows(g, yv, relu, begin, end, out, masked, sums);
      if (after_block) after_block(k, begin, end, relu ? masked : g);
    }
  });
  for (int64_t k = 0; db != nullptr && k < blocks; ++k) {
    for (int64_t o = 0; o < out; ++o) db[o] += partial[k * out + o];
  }
  return relu ? masked : g;
}

// sums[i] = the sum over blocks b, in order, of partial[b * size + i].
void SumWeightGradientBlocks(const float* partial, int64_t blocks, int64_t size, float* sums) {
  ParallelFor(0, size, std::max<int64_t>(1, 4096 / std::max<int64_t>(blocks, 1)),
              [&](int64_t first, int64_t last) {
                for (int64_t i = first; i < last; ++i) {
                  float sum = 0.0f;
                  for (int64_t b = 0; b < blocks; ++b) sum += partial[b * size + i];
                  sums[i] = sum;
                }
              });
}

}  // namespace

Status FullyConnectedBackward(const Tensor& x, const Tensor& weight, const Tensor& y,
                              const Tensor& dy, Activation activation, Tensor* dx, Tensor* dweight,
                              Tensor* dbias, ComputePrecision precision, const Bf16Copies& copies,
                              bool overwrite_dy) {
  constexpr const char* kOp = "FullyConnectedBackward";
  EMBER_RETURN_IF_ERROR(CheckCpuPrecision(kOp, precision));
  EMBER_RETURN_IF_ERROR(CheckRank(kOp, "x", x, DType::kF32, 2));
  EMBER_RETURN_IF_ERROR(CheckRank(kOp, "weight", weight, DType::kF32, 2));
  const int64_t batch = x.dim(0), in = x.dim(1), out = weight.dim(0);
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "weight", weight, DType::kF32, {out, in}));
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "y", y, DType::kF32, {batch, out}));
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "dy", dy, DType::kF32, {batch, out}));
  if (dx != nullptr) EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "dx", dx, DType::kF32, {batch, in}));
  if ((dweight == nullptr) != (dbias == nullptr)) {
    return Status::InvalidArgument(kOp, ": dweight and dbias are both given or both null");
  }
  if (dweight != nullptr) {
    EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "dweight", dweight, DType::kF32, {out, in}));
    EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "dbias", dbias, DType::kF32, {out}));
  }

  // A layer narrow on the output side computes dweight and dx block by block
  // inside the pass over dy, into one partial sum of dweight per block;
  // otherwise oneDNN computes the products after it.
  const bool nonempty = batch > 0 && in > 0 && out > 0;
  const bool narrow = nonempty && internal::IsNarrowOutput(out);
  const int64_t block = narrow ? internal::NarrowRowBlock(in, out) : RowBlock(out);
  Tensor partial;
  BlockHook after_block;
  if (narrow) {
    Result<Tensor> scratch = Scratch({(batch + block - 1) / block, in * out});
    if (!scratch.ok()) return scratch.status().WithContext(kOp);
    partial = *std::move(scratch);
    float* p = partial.data<float>();
    const float* xv = x.data<float>();
    const float* w = weight.data<float>();
    float* dxv = dx != nullptr ? dx->data<float>() : nullptr;
    after_block = [=](int64_t index, int64_t begin, int64_t end, const float* g) {
      internal::NarrowOutputGradients(g, xv, w, begin, end, in, out, p + index * in * out, dxv);
    };
  }
  Tensor masked;
  Result<const float*> grad = ActivationGradientAndBiasSums(
      y, dy, activation, batch, out, block, after_block, overwrite_dy, &masked, dbias);
  if (!grad.ok()) return grad.status().WithContext(kOp);
  if (!nonempty) {
    // Products over an empty dimension are zero; oneDNN is not asked for them.
    if (dweight != nullptr) dweight->SetZero();
    if (dx != nullptr) dx->SetZero();
    return Status::OK();
  }
  if (dweight == nullptr) {
    // The input gradient alone (the narrow pass computed it with its own
    // partial sums, which go unused).
    if (narrow || dx == nullptr) return Status::OK();
    if (precision == ComputePrecision::kBf16) {
      Result<Tensor> gb = ToBf16(*grad, batch, out);
      if (!gb.ok()) return gb.status().WithContext(kOp);
      Tensor w_local;
      Result<const BFloat16*> wb =
          Rounded("weight", weight.data<float>(), out, in, copies.weight, &w_local);
      if (!wb.ok()) return wb.status().WithContext(kOp);
      return internal::Bf16Gemm(kOp, 'N', 'N', batch, in, out, gb->data<BFloat16>(), out, *wb, in,
                                dx->data<float>(), in);
    }
    return Sgemm(kOp, 'N', 'N', batch, in, out, *grad, out, weight.data<float>(), in,
                 dx->data<float>(), in);
  }
  if (narrow) {
    SumWeightGradientBlocks(partial.data<float>(), partial.dim(0), in * out,
                            dweight->data<float>());
  } else if (precision == ComputePrecision::kBf16) {
    Result<Tensor> gb = ToBf16(*grad, batch, out);
    if (!gb.ok()) return gb.status().WithContext(kOp);
    masked = Tensor();  // the f32 gradient is no longer needed
    Tensor x_local, w_local;
    Result<const BFloat16*> xb = Rounded("x", x.data<float>(), batch, in, copies.x, &x_local);
    if (!xb.ok()) return xb.status().WithContext(kOp);
    EMBER_RETURN_IF_ERROR(internal::Bf16Gemm(kOp, 'T', 'N', out, in, batch, gb->data<BFloat16>(),
                                             out, *xb, in, dweight->data<float>(), in));
    if (dx != nullptr) {
      Result<const BFloat16*> wb =
          Rounded("weight", weight.data<float>(), out, in, copies.weight, &w_local);
      if (!wb.ok()) return wb.status().WithContext(kOp);
      EMBER_RETURN_IF_ERROR(internal::Bf16Gemm(kOp, 'N', 'N', batch, in, out, gb->data<BFloat16>(),
                                               out, *wb, in, dx->data<float>(), in));
    }
    return Status::OK();
  } else {
    EMBER_RETURN_IF_ERROR(Sgemm(kOp, 'T', 'N', out, in, batch, *grad, out, x.data<float>(), in,
                                dweight->data<float>(), in));
  }
  if (dx != nullptr && !narrow) {
    EMBER_RETURN_IF_ERROR(Sgemm(kOp, 'N', 'N', batch, in, out, *grad, out, weight.data<float>(), in,
                                dx->data<float>(), in));
  }
  return Status::OK();
}

}  // namespace ember::ops
