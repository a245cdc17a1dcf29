#pragma once

// bf16 GEMMs on the CPU for ComputePrecision::kBf16 (ops/precision.h): oneDNN
// matmul primitives with bf16 operands and f32 accumulation and output, which
// oneDNN runs on AMX tiles or AVX512-BF16 dot products.

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"

namespace ember::ops::internal {

// True when oneDNN runs bf16 products in hardware on this CPU (AVX512-BF16 or
// AMX, and ONEDNN_MAX_CPU_ISA does not forbid them).
bool CpuHasBf16();

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

}  // namespace ember::ops::internal
