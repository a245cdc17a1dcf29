#pragma once

// Cached oneDNN matmul primitives on the CPU: the bf16 products of
// ComputePrecision::kBf16 (ops/precision.h), with bf16 operands and f32
// accumulation and output, which oneDNN runs on AMX tiles or AVX512-BF16 dot
// products; and the f32 forward product of a fully connected layer with its
// bias and ReLU applied in the product's epilogue.

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"

namespace ember::ops::internal {

// True when oneDNN runs bf16 products in hardware on this CPU (AVX512-BF16 or
// AMX, and ONEDNN_MAX_CPU_ISA does not forbid them).
bool CpuHasBf16();
// What a kernel asked for bf16 products says (after its name) when
// !CpuHasBf16().
inline constexpr char kNoBf16Products[] = "bf16 products need a CPU with AVX512-BF16 or AMX";

// c[m, n] = a[m, k] (transposed if transa = 'T') * b[k, n] (likewise), all
// row-major with leading dimensions of their stored shapes, as dnnl_sgemm with
// alpha 1 and beta 0; a and b in bf16, sums and c in f32. Each shape's
// primitive is built once (per OpenMP thread count) and cached for the
// process. Safe to call concurrently (each call brings its own scratchpad).
// Returns Internal naming `op` and the shape if oneDNN fails, and
// FailedPrecondition if !CpuHasBf16().
Status Bf16Gemm(const char* op, char transa, char transb, int64_t m, int64_t n, int64_t k,
                const BFloat16* a, int64_t lda, const BFloat16* b, int64_t ldb, float* c,
                int64_t ldc);

// y[m, n] = act(x[m, k] * w[n, k]^T + bias[n]) in f32, act = ReLU when `relu`
// else the identity, all row-major and dense: one primitive whose epilogue
// adds the bias and applies the activation while each block of y is still in
// registers, instead of a product and a pass over y. Cached and thread-safe
// as Bf16Gemm; Internal naming `op` and the shape if oneDNN fails.
Status F32LinearForward(const char* op, int64_t m, int64_t n, int64_t k, const float* x,
                        const float* w, const float* bias, bool relu, float* y);

// The most primitives the process keeps (Bf16Gemm's and F32LinearForward's
// together); shapes past it are built for each call.
constexpr int64_t kMaxCachedMatmuls = 1024;
// Primitives kept now.
int64_t CachedMatmuls();

}  // namespace ember::ops::internal
