// Embedding-bag pooling (sum or mean of the rows of each bag) and its gradient.
// The gradient of a row sums the gradients of the bags that hold it in the
// order of row_index, whatever the thread count (ARCHITECTURE.md, Determinism).

#include "ops/dense_ops.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/simd.h"
#include "core/threads.h"
#include "ops/internal/tensor_checks.h"

namespace ember::ops {
namespace {

// Bags (forward) or rows (backward) per parallel chunk, for about this many
// floats of work per chunk.
constexpr int64_t kFloatsPerChunk = 1 << 14;

int64_t Grain(int64_t items, int64_t floats) {
  const int64_t per_item = std::max<int64_t>(1, floats / std::max<int64_t>(1, items));
  return std::max<int64_t>(1, kFloatsPerChunk / per_item);
}

// Whether some v[i + 1] < v[i], i + 1 < n. Branch-free, so that it
// vectorises: the checks run on every batch, twice (forward and backward).
EMBER_MULTIVERSIONED
bool AnyDecrease(const int64_t* v, int64_t n) {
  bool decrease = false;
  for (int64_t i = 1; i < n; ++i) decrease |= v[i] < v[i - 1];
  return decrease;
}

// Whether some v[i] is outside [0, limit), limit >= 0 (a negative value is a
// large one as unsigned). Branch-free, as AnyDecrease.
EMBER_MULTIVERSIONED
bool AnyOutside(const int64_t* v, int64_t n, int64_t limit) {
  bool outside = false;
  for (int64_t i = 0; i < n; ++i) {
    outside |= static_cast<uint64_t>(v[i]) >= static_cast<uint64_t>(limit);
  }
  return outside;
}

// Checks the CSR description of the bags: offsets i64 [num_bags + 1] starting
// at 0, non-decreasing, ending at nnz; row_index i64 [nnz] in [0, num_rows).
Status CheckBags(const char* op, const Tensor& row_index, const Tensor& offsets, int64_t num_rows) {
  EMBER_RETURN_IF_ERROR(CheckRank(op, "row_index", row_index, DType::kI64, 1));
  EMBER_RETURN_IF_ERROR(CheckRank(op, "offsets", offsets, DType::kI64, 1));
  if (offsets.dim(0) < 1) {
    return Status::InvalidArgument(op, ": offsets must hold num_bags + 1 >= 1 values, got ",
                                   offsets.DebugString());
  }
  const int64_t nnz = row_index.dim(0);
  const int64_t num_bags = offsets.dim(0) - 1;
  const int64_t* off = offsets.data<int64_t>();
  if (off[0] != 0) return Status::InvalidArgument(op, ": offsets[0] = ", off[0], ", expected 0");
  if (AnyDecrease(off, num_bags + 1)) {
    for (int64_t b = 0; b < num_bags; ++b) {
      if (off[b + 1] < off[b]) {
        return Status::InvalidArgument(op, ": offsets decrease at bag ", b, " (", off[b], " then ",
                                       off[b + 1], ")");
      }
    }
  }
  if (off[num_bags] != nnz) {
    return Status::InvalidArgument(op, ": offsets[", num_bags, "] = ", off[num_bags],
                                   " but row_index holds ", nnz, " values");
  }
  const int64_t* idx = row_index.data<int64_t>();
  if (AnyOutside(idx, nnz, num_rows)) {
    for (int64_t p = 0; p < nnz; ++p) {
      if (idx[p] < 0 || idx[p] >= num_rows) {
        return Status::InvalidArgument(op, ": row_index[", p, "] = ", idx[p], " is outside [0, ",
                                       num_rows, ")");
      }
    }
  }
  return Status::OK();
}

// What a bag's sum is divided by: its size for a non-empty mean, else 1.
float BagDivisor(Pooling pooling, int64_t bag_size) {
  return pooling == Pooling::kMean && bag_size > 0 ? static_cast<float>(bag_size) : 1.0f;
}

// dst[0, dim) += src[0, dim) / divisor (divisor 1: src alone), lane by lane:
// kBy16 (dim a multiple of 16), 16 floats at a time (one AVX-512 add per row
// of 16 in the callers' AVX-512 clones), else one at a time; the same sums.
template <bool kBy16>
[[gnu::always_inline]] inline void AddRow(const float* src, float divisor, int64_t dim,
                                          float* dst) {
  if constexpr (kBy16) {
    for (int64_t c = 0; c < dim; c += 16) {
      F32x16 v = LoadF32x16(src + c);
      if (divisor != 1.0f) v /= BroadcastF32x16(divisor);
      StoreF32x16(dst + c, LoadF32x16(dst + c) + v);
    }
  } else if (divisor == 1.0f) {
    for (int64_t d = 0; d < dim; ++d) dst[d] += src[d];
  } else {
    for (int64_t d = 0; d < dim; ++d) dst[d] += src[d] / divisor;
  }
}

// out[b] = (0 + the rows of bag b in row_index order) / divisor(b), for
// bags [begin, end). A width that is a multiple of 16 sums in registers.
EMBER_MULTIVERSIONED
void PoolBags(const float* table, const int64_t* idx, const int64_t* off, int64_t dim,
              Pooling pooling, int64_t begin, int64_t end, float* out) {
  for (int64_t b = begin; b < end; ++b) {
    float* dst = out + b * dim;
    if (dim % 16 == 0) {
      for (int64_t c = 0; c < dim; c += 16) {
        F32x16 sum = {};
        for (int64_t p = off[b]; p < off[b + 1]; ++p) sum += LoadF32x16(table + idx[p] * dim + c);
        StoreF32x16(dst + c, sum);
      }
    } else {
      std::memset(dst, 0, static_cast<size_t>(dim) * sizeof(float));
      for (int64_t p = off[b]; p < off[b + 1]; ++p) {
        AddRow<false>(table + idx[p] * dim, 1.0f, dim, dst);
      }
    }
    const float divisor = BagDivisor(pooling, off[b + 1] - off[b]);
    if (divisor != 1.0f) {
      for (int64_t d = 0; d < dim; ++d) dst[d] /= divisor;
    }
  }
}

// drows[u] += dout[b] / divisor(b) for every position of row u in bag b, in
// row_index order, for the rows u in [lo, hi).
template <bool kBy16>
[[gnu::always_inline]] inline void AddBagGradsOf(const float* g, const int64_t* idx,
                                                 const int64_t* off, int64_t num_bags, int64_t dim,
                                                 Pooling pooling, int64_t lo, int64_t hi,
                                                 float* out) {
  for (int64_t b = 0; b < num_bags; ++b) {
    const float divisor = BagDivisor(pooling, off[b + 1] - off[b]);
    for (int64_t p = off[b]; p < off[b + 1]; ++p) {
      const int64_t u = idx[p];
      if (u >= lo && u < hi) AddRow<kBy16>(g + b * dim, divisor, dim, out + (u - lo) * dim);
    }
  }
}

// The same into `out`, rows [lo, hi) of drows (out[0] is row lo), zeroed
// first.
EMBER_MULTIVERSIONED
void AddBagGrads(const float* g, const int64_t* idx, const int64_t* off, int64_t num_bags,
                 int64_t dim, Pooling pooling, int64_t lo, int64_t hi, float* out) {
  std::memset(out, 0, static_cast<size_t>((hi - lo) * dim) * sizeof(float));
  if (dim % 16 == 0) {
    AddBagGradsOf<true>(g, idx, off, num_bags, dim, pooling, lo, hi, out);
  } else {
    AddBagGradsOf<false>(g, idx, off, num_bags, dim, pooling, lo, hi, out);
  }
}

// out[i] += from[i] for `count` floats.
EMBER_MULTIVERSIONED
void AddRange(const float* from, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i) out[i] += from[i];
}

}  // namespace

Status EmbeddingBagForward(const Tensor& rows, const Tensor& row_index, const Tensor& offsets,
                           Pooling pooling, Tensor* out) {
  constexpr const char* kOp = "EmbeddingBagForward";
  EMBER_RETURN_IF_ERROR(CheckRank(kOp, "rows", rows, DType::kF32, 2));
  EMBER_RETURN_IF_ERROR(CheckBags(kOp, row_index, offsets, rows.dim(0)));
  const int64_t dim = rows.dim(1);
  const int64_t num_bags = offsets.dim(0) - 1;
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "out", out, DType::kF32, {num_bags, dim}));
  const float* table = rows.data<float>();
  const int64_t* idx = row_index.data<int64_t>();
  const int64_t* off = offsets.data<int64_t>();
  float* o = out->data<float>();
  const int64_t grain = Grain(num_bags, row_index.dim(0) * dim);
  ParallelFor(0, num_bags, grain, [&](int64_t begin, int64_t end) {
    PoolBags(table, idx, off, dim, pooling, begin, end, o);
  });
  return Status::OK();
}

Status EmbeddingBagBackward(const Tensor& dout, const Tensor& row_index, const Tensor& offsets,
                            Pooling pooling, Tensor* drows, int ranges,
                            int64_t bags_per_example) {
  constexpr const char* kOp = "EmbeddingBagBackward";
  EMBER_RETURN_IF_ERROR(CheckRank(kOp, "dout", dout, DType::kF32, 2));
  if (drows == nullptr) return Status::InvalidArgument(kOp, ": drows is null");
  EMBER_RETURN_IF_ERROR(CheckRank(kOp, "drows", *drows, DType::kF32, 2));
  const int64_t num_rows = drows->dim(0), dim = dout.dim(1);
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "drows", drows, DType::kF32, {num_rows, dim}));
  EMBER_RETURN_IF_ERROR(CheckBags(kOp, row_index, offsets, num_rows));
  const int64_t num_bags = offsets.dim(0) - 1;
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "dout", dout, DType::kF32, {num_bags, dim}));

  const int64_t* off = offsets.data<int64_t>();
  const int64_t* idx = row_index.data<int64_t>();
  const float* g = dout.data<float>();
  float* dr = drows->data<float>();
  // Each task owns a range of rows and walks all of row_index in order,
  // adding the bags that hold its rows: each row's sum is in row_index order
  // for any split into tasks, and no task writes another's rows. Walking the
  // (small, sequential) index once per task replaced a serial transposition
  // into per-row bag lists, the larger part of this op's time on 2 threads.
  const int64_t tasks =
      std::min<int64_t>(std::max(1, CurrentArenaThreads()),
                        std::max<int64_t>(1, row_index.dim(0) * dim / kFloatsPerChunk));
  if (ranges <= 1) {
    ParallelFor(0, tasks, 1, [&](int64_t first, int64_t last) {
      for (int64_t t = first; t < last; ++t) {
        const int64_t lo = num_rows * t / tasks, hi = num_rows * (t + 1) / tasks;
        if (lo < hi) AddBagGrads(g, idx, off, num_bags, dim, pooling, lo, hi, dr + lo * dim);
      }
    });
    return Status::OK();
  }
  if (bags_per_example < 1 || num_bags % bags_per_example != 0) {
    return Status::InvalidArgument(kOp, ": ", num_bags, " bags are not examples of ",
                                   bags_per_example, " bags");
  }
  // Each task sums its rows per range of examples into a scratch of its
  // rows and adds the ranges' sums in range order.
  const int64_t examples = num_bags / bags_per_example;
  ParallelFor(0, tasks, 1, [&](int64_t first, int64_t last) {
    std::vector<float> scratch;
    for (int64_t t = first; t < last; ++t) {
      const int64_t lo = num_rows * t / tasks, hi = num_rows * (t + 1) / tasks;
      if (lo >= hi) continue;
      scratch.resize(static_cast<size_t>((hi - lo) * dim));
      for (int k = 0; k < ranges; ++k) {
        const int64_t begin = examples * k / ranges * bags_per_example;
        const int64_t end = examples * (k + 1) / ranges * bags_per_example;
        float* out = k == 0 ? dr + lo * dim : scratch.data();
        AddBagGrads(g + begin * dim, idx, off + begin, end - begin, dim, pooling, lo, hi, out);
        if (k > 0) AddRange(scratch.data(), (hi - lo) * dim, dr + lo * dim);
      }
    }
  });
  return Status::OK();
}

}  // namespace ember::ops
