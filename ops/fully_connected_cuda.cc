// The fully connected layer on CUDA through cuBLASLt, with the bias (and the
// ReLU) fused into the GEMM's epilogue and, in the backward, the bias gradient
// fused into the weight-gradient GEMM (CUBLASLT_EPILOGUE_BGRADB). Where
// cuBLASLt has no algorithm for a fused form (its heuristic returns none, as
// it may for odd sizes or 16-bit inputs), the same product runs through
// cublasGemmEx with the bias, ReLU and bias gradient as separate kernels.
// Also the per-thread cuBLAS handles and the row-major SGEMM of ops/cuda/blas.h.

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "ops/bias_activation.cuh"
#include "ops/cuda/blas.h"
#include "ops/cuda/common.h"
#include "ops/cuda/kernels.h"
#include "ops/dense_ops_cuda.h"

namespace ember::ops {
namespace cuda {
namespace {

// cuBLASLt workspace per GEMM (stream-ordered scratch); 32 MiB is what NVIDIA
// recommends for Hopper.
constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;

struct ThreadHandles {
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
};

// Handle sets not in use, per device. A thread takes one for a device on
// first use and gives it back when it exits (pipelined training starts new
// stage threads for every Fit), so the process holds as many sets as it ever
// ran threads at once. Never destroyed: destroying them at process exit can
// run after the CUDA runtime has shut down.
struct HandlePool {
  std::mutex mu;
  std::map<int, std::vector<ThreadHandles>> idle;
};

HandlePool& Pool() {
  static HandlePool* pool = new HandlePool;
  return *pool;
}

// The handle sets a thread holds, given back to the pool at its exit.
struct ThreadLease {
  std::map<int, ThreadHandles> held;
  ~ThreadLease() {
    HandlePool& pool = Pool();
    std::lock_guard<std::mutex> lock(pool.mu);
    for (const auto& [device, h] : held) pool.idle[device].push_back(h);
  }
};

// The calling thread's handles for `device` (a thread's own: cuBLAS handles
// are not for concurrent use).
Result<ThreadHandles*> HandlesFor(const char* op, int device) {
  thread_local ThreadLease lease;
  auto it = lease.held.find(device);
  if (it == lease.held.end()) {
    ThreadHandles reused;
    {
      HandlePool& pool = Pool();
      std::lock_guard<std::mutex> lock(pool.mu);
      std::vector<ThreadHandles>& idle = pool.idle[device];
      if (!idle.empty()) {
        reused = idle.back();
        idle.pop_back();
      }
    }
    it = lease.held.emplace(device, reused).first;
  }
  ThreadHandles& h = it->second;
  if (h.blas == nullptr) {
    EMBER_RETURN_IF_ERROR(CublasCall(cublasCreate(&h.blas), op, "cublasCreate"));
  }
  if (h.lt == nullptr) {
    const cublasStatus_t status = cublasLtCreate(&h.lt);
    if (status != CUBLAS_STATUS_SUCCESS) {
      h.lt = nullptr;
      return CublasCall(status, op, "cublasLtCreate");
    }
  }
  return &h;
}

cudaDataType_t CudaTypeOf(ComputePrecision precision) {
  switch (precision) {
    case ComputePrecision::kBf16:
      return CUDA_R_16BF;
    case ComputePrecision::kF16:
      return CUDA_R_16F;
    case ComputePrecision::kF32:
      break;
  }
  return CUDA_R_32F;
}

// One operand of a GEMM: device data in the precision's type.
struct Operand {
  const void* data;
  cudaDataType_t type;
};

// `src` (n floats) as an operand of `precision`: itself for f32, else a cast
// copy in `scratch`.
Result<Operand> AsOperand(const char* op, const float* src, int64_t n, ComputePrecision precision,
                          DeviceScratch& scratch, cudaStream_t stream) {
  if (precision == ComputePrecision::kF32) return Operand{src, CUDA_R_32F};
  EMBER_ASSIGN_OR_RETURN(uint16_t * dst, scratch.Get<uint16_t>(op, n));
  if (precision == ComputePrecision::kBf16) {
    LaunchCastToBf16(src, dst, n, stream);
  } else {
    LaunchCastToF16(src, dst, n, stream);
  }
  EMBER_RETURN_IF_ERROR(CheckLaunch(op, "cast to 16 bits"));
  return Operand{dst, CudaTypeOf(precision)};
}

// A column-major GEMM D[m, n] = op(A) op(B) in cuBLAS's terms (f32 D, f32
// accumulation), A stored with leading dimension lda and B with ldb.
struct GemmShape {
  cublasOperation_t trans_a;
  cublasOperation_t trans_b;
  int m, n, k;
  Operand a;
  int lda;
  Operand b;
  int ldb;
  float* d;
  int ldd;
};

// The largest power of two up to 256 that divides the address. cuBLASLt's
// heuristic assumes 256-byte aligned operands unless told otherwise, and an
// algorithm picked under that assumption may fault (misaligned address, a
// sticky error) on a row slice of a tensor; so the real alignment is passed.
uint32_t AlignmentOf(const void* ptr) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

// The epilogue's bias (or bias gradient) vector: a precaution, not from
// NVIDIA's documentation (which says the heuristic reads the pointer's
// alignment): other cuBLASLt users report faults with bias vectors aligned to
// less than 16 bytes, so those take the unfused path.
constexpr uint32_t kLtVectorAlignment = 16;

// RAII for the cuBLASLt descriptors of one call.
class LtDescriptors {
 public:
  ~LtDescriptors() {
    if (pref_ != nullptr) cublasLtMatmulPreferenceDestroy(pref_);
    if (d_ != nullptr) cublasLtMatrixLayoutDestroy(d_);
    if (b_ != nullptr) cublasLtMatrixLayoutDestroy(b_);
    if (a_ != nullptr) cublasLtMatrixLayoutDestroy(a_);
    if (op_ != nullptr) cublasLtMatmulDescDestroy(op_);
  }
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;
  cublasLtMatmulPreference_t pref_ = nullptr;
};

// Runs `g` through cuBLASLt with `epilogue` and its vector (the bias for
// BIAS/RELU_BIAS, the bias gradient for BGRADB). Sets *fused to false, and
// queues nothing, when cuBLASLt offers no algorithm for it.
Status LtGemm(const char* op, cublasLtHandle_t lt, const GemmShape& g, cublasLtEpilogue_t epilogue,
              const float* vector, DeviceScratch& scratch, cudaStream_t stream, bool* fused) {
  *fused = false;
  if (vector != nullptr && AlignmentOf(vector) < kLtVectorAlignment) return Status::OK();
  LtDescriptors desc;
  // Descriptor setup failing means "not offered": the fallback still runs.
  if (cublasLtMatmulDescCreate(&desc.op_, CUBLAS_COMPUTE_32F, CUDA_R_32F) !=
      CUBLAS_STATUS_SUCCESS) {
    return Status::OK();
  }
  const int32_t ta = g.trans_a, tb = g.trans_b;
  const void* vec = vector;
  bool ok =
      cublasLtMatmulDescSetAttribute(desc.op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)) ==
          CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulDescSetAttribute(desc.op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)) ==
          CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulDescSetAttribute(desc.op_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                     sizeof(epilogue)) == CUBLAS_STATUS_SUCCESS;
  if (ok && vector != nullptr) {
    // f32 whatever the operands' type (the default follows D, also f32 here).
    const int32_t vector_type = CUDA_R_32F;
    ok = cublasLtMatmulDescSetAttribute(desc.op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &vec,
                                        sizeof(vec)) == CUBLAS_STATUS_SUCCESS &&
         cublasLtMatmulDescSetAttribute(desc.op_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                        &vector_type,
                                        sizeof(vector_type)) == CUBLAS_STATUS_SUCCESS;
  }
  // Layouts of the matrices as stored: op(A) is m x k, so A is k x m when
  // transposed.
  const bool a_t = g.trans_a == CUBLAS_OP_T, b_t = g.trans_b == CUBLAS_OP_T;
  ok = ok &&
       cublasLtMatrixLayoutCreate(&desc.a_, g.a.type, a_t ? g.k : g.m, a_t ? g.m : g.k, g.lda) ==
           CUBLAS_STATUS_SUCCESS &&
       cublasLtMatrixLayoutCreate(&desc.b_, g.b.type, b_t ? g.n : g.k, b_t ? g.k : g.n, g.ldb) ==
           CUBLAS_STATUS_SUCCESS &&
       cublasLtMatrixLayoutCreate(&desc.d_, CUDA_R_32F, g.m, g.n, g.ldd) == CUBLAS_STATUS_SUCCESS &&
       cublasLtMatmulPreferenceCreate(&desc.pref_) == CUBLAS_STATUS_SUCCESS;
  const uint64_t workspace_bytes = kLtWorkspaceBytes;
  ok = ok && cublasLtMatmulPreferenceSetAttribute(desc.pref_,
                                                  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &workspace_bytes,
                                                  sizeof(workspace_bytes)) == CUBLAS_STATUS_SUCCESS;
  const uint32_t align_a = AlignmentOf(g.a.data), align_b = AlignmentOf(g.b.data),
                 align_d = AlignmentOf(g.d);
  ok = ok &&
       cublasLtMatmulPreferenceSetAttribute(desc.pref_, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                            &align_a, sizeof(align_a)) == CUBLAS_STATUS_SUCCESS &&
       cublasLtMatmulPreferenceSetAttribute(desc.pref_, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                            &align_b, sizeof(align_b)) == CUBLAS_STATUS_SUCCESS &&
       cublasLtMatmulPreferenceSetAttribute(desc.pref_, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                            &align_d, sizeof(align_d)) == CUBLAS_STATUS_SUCCESS &&
       cublasLtMatmulPreferenceSetAttribute(desc.pref_, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                            &align_d, sizeof(align_d)) == CUBLAS_STATUS_SUCCESS;
  if (!ok) return Status::OK();
  cublasLtMatmulHeuristicResult_t heuristic = {};
  int returned = 0;
  if (cublasLtMatmulAlgoGetHeuristic(lt, desc.op_, desc.a_, desc.b_, desc.d_, desc.d_, desc.pref_,
                                     1, &heuristic, &returned) != CUBLAS_STATUS_SUCCESS ||
      returned == 0) {
    return Status::OK();
  }
  void* workspace = nullptr;
  if (heuristic.workspaceSize > 0) {
    EMBER_ASSIGN_OR_RETURN(workspace,
                           scratch.Get<uint8_t>(op, static_cast<int64_t>(heuristic.workspaceSize)));
  }
  const float one = 1.0f, zero = 0.0f;
  const cublasStatus_t status =
      cublasLtMatmul(lt, desc.op_, &one, g.a.data, desc.a_, g.b.data, desc.b_, &zero, g.d,
                     desc.d_, g.d, desc.d_, &heuristic.algo, workspace, heuristic.workspaceSize,
                     stream);
  // An algorithm the heuristic offered but that does not run here (e.g. an
  // unsupported alignment) leaves the fallback to do the work.
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return Status::OK();
  EMBER_RETURN_IF_ERROR(CublasCall(status, op, "cublasLtMatmul"));
  *fused = true;
  return Status::OK();
}

// The same product through cublasGemmEx (any sizes, alignments and types).
Status PlainGemm(const char* op, cublasHandle_t blas, const GemmShape& g) {
  const float one = 1.0f, zero = 0.0f;
  return CublasCall(cublasGemmEx(blas, g.trans_a, g.trans_b, g.m, g.n, g.k, &one, g.a.data,
                                 g.a.type, g.lda, g.b.data, g.b.type, g.ldb, &zero, g.d,
                                 CUDA_R_32F, g.ldd, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                    op, "cublasGemmEx");
}

Status CheckSizes(const char* op, int64_t batch, int64_t in, int64_t out) {
  EMBER_RETURN_IF_ERROR(CheckFitsInt(op, "the batch", batch));
  EMBER_RETURN_IF_ERROR(CheckFitsInt(op, "the input width", in));
  return CheckFitsInt(op, "the output width", out);
}

}  // namespace

Status CublasCall(cublasStatus_t status, const char* op, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::OK();
  if (status == CUBLAS_STATUS_ALLOC_FAILED) {
    return Status::ResourceExhausted(op, ": ", what, ": ", cublasGetStatusString(status));
  }
  return Status::Internal(op, ": ", what, " failed: ", cublasGetStatusString(status), " (",
                          static_cast<int>(status), ")");
}

Result<cublasHandle_t> CublasFor(const char* op, CudaStream& stream) {
  EMBER_ASSIGN_OR_RETURN(ThreadHandles * h, HandlesFor(op, stream.device()));
  EMBER_RETURN_IF_ERROR(CublasCall(cublasSetStream(h->blas, Native(stream)), op, "cublasSetStream"));
  return h->blas;
}

Status RowMajorSgemm(const char* op, CudaStream& stream, bool trans_a, bool trans_b, int64_t m,
                     int64_t n, int64_t k, float alpha, const float* a, const float* b,
                     float beta, float* c) {
  CHECK(beta == 0.0f || beta == 1.0f) << "RowMajorSgemm takes beta 0 or 1";
  EMBER_RETURN_IF_ERROR(CheckSizes(op, m, k, n));
  if (m == 0 || n == 0) return Status::OK();
  if (k == 0) {
    // An empty product: C = beta * C.
    if (beta != 0.0f) return Status::OK();
    return CudaCall(cudaMemsetAsync(c, 0, static_cast<size_t>(m * n) * sizeof(float),
                                    Native(stream)),
                    op, "cudaMemsetAsync");
  }
  EMBER_ASSIGN_OR_RETURN(cublasHandle_t blas, CublasFor(op, stream));
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, and a
  // row-major matrix read column-major is its transpose.
  const int lda = static_cast<int>(trans_a ? m : k);
  const int ldb = static_cast<int>(trans_b ? k : n);
  return CublasCall(
      cublasSgemm(blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                  static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b, ldb,
                  a, lda, &beta, c, static_cast<int>(n)),
      op, "cublasSgemm");
}

Status FullyConnectedForwardRaw(const char* op, CudaStream& stream, const float* x,
                                const float* weight, const float* bias, int64_t batch, int64_t in,
                                int64_t out, Activation activation, ComputePrecision precision,
                                float* y) {
  EMBER_RETURN_IF_ERROR(CheckSizes(op, batch, in, out));
  if (batch == 0 || out == 0) return Status::OK();
  const cudaStream_t s = Native(stream);
  const int relu = activation == Activation::kRelu ? 1 : 0;
  if (in == 0) {
    // y = act(bias) on every row: the product over an empty dimension is 0.
    EMBER_RETURN_IF_ERROR(CudaCall(
        cudaMemsetAsync(y, 0, static_cast<size_t>(batch * out) * sizeof(float), s), op,
        "cudaMemsetAsync"));
    LaunchBiasActivation(y, bias, batch, static_cast<int>(out), relu, s);
    return CheckLaunch(op, "BiasActivationKernel");
  }
  EMBER_ASSIGN_OR_RETURN(ThreadHandles * handles, HandlesFor(op, stream.device()));
  EMBER_RETURN_IF_ERROR(CublasCall(cublasSetStream(handles->blas, s), op, "cublasSetStream"));
  DeviceScratch scratch(stream);
  EMBER_ASSIGN_OR_RETURN(const Operand w, AsOperand(op, weight, out * in, precision, scratch, s));
  EMBER_ASSIGN_OR_RETURN(const Operand xs, AsOperand(op, x, batch * in, precision, scratch, s));
  // Row-major y = x W^T is column-major y^T [out, B] = W x^T, where W read
  // column-major is W^T [in, out].
  const GemmShape g{CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out), static_cast<int>(batch),
                    static_cast<int>(in), w, static_cast<int>(in), xs, static_cast<int>(in), y,
                    static_cast<int>(out)};
  bool fused = false;
  EMBER_RETURN_IF_ERROR(LtGemm(op, handles->lt, g,
                               relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS, bias,
                               scratch, s, &fused));
  if (fused) return Status::OK();
  EMBER_RETURN_IF_ERROR(PlainGemm(op, handles->blas, g));
  LaunchBiasActivation(y, bias, batch, static_cast<int>(out), relu, s);
  return CheckLaunch(op, "BiasActivationKernel");
}

Status FullyConnectedBackwardRaw(const char* op, CudaStream& stream, const float* x,
                                 const float* weight, const float* y, const float* dy,
                                 int64_t batch, int64_t in, int64_t out, Activation activation,
                                 ComputePrecision precision, float* dx, float* dweight,
                                 float* dbias) {
  EMBER_RETURN_IF_ERROR(CheckSizes(op, batch, in, out));
  const cudaStream_t s = Native(stream);
  DeviceScratch scratch(stream);
  // The gradient through the ReLU, dy * (y > 0), in f32.
  const float* grad = dy;
  if (activation == Activation::kRelu && batch * out > 0) {
    EMBER_ASSIGN_OR_RETURN(float* masked, scratch.Get<float>(op, batch * out));
    LaunchReluMask(y, dy, masked, batch * out, s);
    EMBER_RETURN_IF_ERROR(CheckLaunch(op, "ReluMaskKernel"));
    grad = masked;
  }
  auto column_sums = [&]() -> Status {
    EMBER_ASSIGN_OR_RETURN(float* partial,
                           scratch.Get<float>(op, ColumnSumsScratch(batch, out)));
    LaunchColumnSums(grad, batch, out, partial, dbias, s);
    return CheckLaunch(op, "ColumnSums");
  };
  if (batch == 0 || out == 0 || in == 0) {
    // Products over an empty dimension are zero.
    if (out * in > 0) {
      EMBER_RETURN_IF_ERROR(CudaCall(
          cudaMemsetAsync(dweight, 0, static_cast<size_t>(out * in) * sizeof(float), s), op,
          "cudaMemsetAsync"));
    }
    if (dx != nullptr && batch * in > 0) {
      EMBER_RETURN_IF_ERROR(
          CudaCall(cudaMemsetAsync(dx, 0, static_cast<size_t>(batch * in) * sizeof(float), s),
                   op, "cudaMemsetAsync"));
    }
    return column_sums();
  }
  EMBER_ASSIGN_OR_RETURN(ThreadHandles * handles, HandlesFor(op, stream.device()));
  EMBER_RETURN_IF_ERROR(CublasCall(cublasSetStream(handles->blas, s), op, "cublasSetStream"));
  EMBER_ASSIGN_OR_RETURN(const Operand xs, AsOperand(op, x, batch * in, precision, scratch, s));
  EMBER_ASSIGN_OR_RETURN(const Operand gs, AsOperand(op, grad, batch * out, precision, scratch, s));
  const int b = static_cast<int>(batch), i = static_cast<int>(in), o = static_cast<int>(out);
  // dW [out, in] = g^T x is column-major dW^T [in, out] = x^T g: x read
  // column-major is x^T [in, B], g read column-major is g^T [out, B].
  const GemmShape dw{CUBLAS_OP_N, CUBLAS_OP_T, i, o, b, xs, i, gs, o, dweight, i};
  bool fused = false;
  if (precision == ComputePrecision::kF32) {
    // BGRADB sums B = g^T over k = the batch: dbias[out].
    EMBER_RETURN_IF_ERROR(
        LtGemm(op, handles->lt, dw, CUBLASLT_EPILOGUE_BGRADB, dbias, scratch, s, &fused));
  }
  if (!fused) {
    EMBER_RETURN_IF_ERROR(PlainGemm(op, handles->blas, dw));
    EMBER_RETURN_IF_ERROR(column_sums());
  }
  if (dx == nullptr) return Status::OK();
  // dx [B, in] = g W is column-major dx^T [in, B] = W^T g^T.
  EMBER_ASSIGN_OR_RETURN(const Operand w, AsOperand(op, weight, out * in, precision, scratch, s));
  const GemmShape dxs{CUBLAS_OP_N, CUBLAS_OP_N, i, b, o, w, i, gs, o, dx, i};
  EMBER_RETURN_IF_ERROR(LtGemm(op, handles->lt, dxs, CUBLASLT_EPILOGUE_DEFAULT, nullptr, scratch,
                               s, &fused));
  if (fused) return Status::OK();
  return PlainGemm(op, handles->blas, dxs);
}

}  // namespace cuda

namespace {

Status CheckPrecision(const char* op, ComputePrecision precision) {
  if (precision == ComputePrecision::kF32 || precision == ComputePrecision::kBf16 ||
      precision == ComputePrecision::kF16) {
    return Status::OK();
  }
  return Status::InvalidArgument(op, ": unknown precision ", static_cast<int>(precision));
}

}  // namespace

Status FullyConnectedForwardCuda(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                 Activation activation, Tensor* y, CudaStream& stream,
                                 ComputePrecision precision) {
  constexpr const char* kOp = "FullyConnectedForwardCuda";
  const Device device = Device::Cuda(stream.device());
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceRank(kOp, "x", x, DType::kF32, 2, device));
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceRank(kOp, "weight", weight, DType::kF32, 2, device));
  const int64_t batch = x.dim(0), in = x.dim(1), out = weight.dim(0);
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceTensor(kOp, "weight", weight, DType::kF32, {out, in}, device));
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceTensor(kOp, "bias", bias, DType::kF32, {out}, device));
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceOutput(kOp, "y", y, DType::kF32, {batch, out}, device));
  EMBER_RETURN_IF_ERROR(CheckPrecision(kOp, precision));
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  return cuda::FullyConnectedForwardRaw(kOp, stream, x.data<float>(), weight.data<float>(),
                                        bias.data<float>(), batch, in, out, activation, precision,
                                        y->data<float>());
}

Status FullyConnectedBackwardCuda(const Tensor& x, const Tensor& weight, const Tensor& y,
                                  const Tensor& dy, Activation activation, Tensor* dx,
                                  Tensor* dweight, Tensor* dbias, CudaStream& stream,
                                  ComputePrecision precision) {
  constexpr const char* kOp = "FullyConnectedBackwardCuda";
  const Device device = Device::Cuda(stream.device());
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceRank(kOp, "x", x, DType::kF32, 2, device));
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceRank(kOp, "weight", weight, DType::kF32, 2, device));
  const int64_t batch = x.dim(0), in = x.dim(1), out = weight.dim(0);
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceTensor(kOp, "weight", weight, DType::kF32, {out, in}, device));
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceTensor(kOp, "y", y, DType::kF32, {batch, out}, device));
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceTensor(kOp, "dy", dy, DType::kF32, {batch, out}, device));
  if (dx != nullptr) {
    EMBER_RETURN_IF_ERROR(
        cuda::CheckDeviceOutput(kOp, "dx", dx, DType::kF32, {batch, in}, device));
  }
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceOutput(kOp, "dweight", dweight, DType::kF32, {out, in}, device));
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceOutput(kOp, "dbias", dbias, DType::kF32, {out}, device));
  EMBER_RETURN_IF_ERROR(CheckPrecision(kOp, precision));
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  return cuda::FullyConnectedBackwardRaw(
      kOp, stream, x.data<float>(), weight.data<float>(), y.data<float>(), dy.data<float>(), batch,
      in, out, activation, precision, dx != nullptr ? dx->data<float>() : nullptr,
      dweight->data<float>(), dbias->data<float>());
}

}  // namespace ember::ops
