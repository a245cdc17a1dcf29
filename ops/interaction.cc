// DLRM's dot interaction (Naumov et al. 2019): the dot product of every pair
// of distinct feature vectors of a sample, strictly lower triangle row by row;
// and DLRM's whole interaction layer, which also passes the bottom MLP's
// output through, without the two concatenations around it.

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

constexpr int64_t kLanes = 16;

// Samples per parallel chunk so that a chunk holds about this many multiply-adds.
constexpr int64_t kWorkPerChunk = 1 << 16;

int64_t SampleGrain(int64_t num_features, int64_t dim) {
  return std::max<int64_t>(1,
                           kWorkPerChunk / std::max<int64_t>(1, num_features * num_features * dim));
}

// Samples ahead whose data both directions prefetch.
constexpr int64_t kPrefetchSamples = 2;

int64_t RoundUpToLanes(int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; }

// Where the F feature vectors of dim floats of sample b live: features
// [0, head_count) in `head` (head_count * dim floats per sample), the rest in
// `tail` ((F - head_count) * dim floats per sample). The plain operator has
// every feature in the head; DLRM's layer has the bottom MLP's output as its
// one head feature and the pooled embeddings as the tail.
template <typename T>
struct Features {
  T* head = nullptr;
  T* tail = nullptr;
  int64_t head_count = 0;
  int64_t num_features = 0;
  int64_t dim = 0;

  T* Row(int64_t b, int64_t j) const {
    return j < head_count ? head + (b * head_count + j) * dim
                          : tail + (b * (num_features - head_count) + j - head_count) * dim;
  }
};

// Sample b's row of a [B, stride] matrix, from column `offset`.
template <typename T>
struct Columns {
  T* data = nullptr;
  int64_t stride = 0;
  int64_t offset = 0;

  T* Row(int64_t b) const { return data + b * stride + offset; }
};

// Rows of a kernel's group: a dot product is a chain of dependent adds, so a
// kernel runs up to this many independent chains side by side (one per row of
// the group) to keep the core's vector units busy instead of waiting on one
// add's latency. Each chain still adds its terms in the same order as a
// scalar loop would.
constexpr int64_t kGroup = 8;

// out_k[l] = sum over d, in order, of xi_k[d] * transposed[d * stride + l]
// for the G rows xi_0..xi_{G-1}: 16 dots of each row at once.
template <int64_t G>
[[gnu::always_inline]] inline void DotGroup(const float* const* xi, const float* transposed,
                                            int64_t stride, int64_t dim, F32x16* out) {
  F32x16 acc[G] = {};
  for (int64_t d = 0; d < dim; ++d) {
    const F32x16 column = LoadF32x16(transposed + d * stride);
#pragma GCC unroll 8
    for (int64_t k = 0; k < G; ++k) acc[k] += BroadcastF32x16(xi[k][d]) * column;
  }
  for (int64_t k = 0; k < G; ++k) out[k] = acc[k];
}

// Transposes the 16x16 block r in registers: four rounds of swapping the
// off-diagonal sub-blocks of 8, 4, 2 and 1 lanes, each a two-input shuffle
// per row (vpermt2ps or cheaper on AVX-512).
[[gnu::always_inline]] inline void Transpose16x16(F32x16* r) {
  using I32x16 = int32_t __attribute__((vector_size(64)));
  auto round = [&](int64_t b, const I32x16& low, const I32x16& high) {
    for (int64_t i = 0; i < kLanes; ++i) {
      if ((i & b) != 0) continue;
      const F32x16 a = r[i], c = r[i + b];
      r[i] = __builtin_shuffle(a, c, low);
      r[i + b] = __builtin_shuffle(a, c, high);
    }
  };
  // Lane l of the first row: a[l] where bit b of l is clear, else c[l - b];
  // of the second: a[l + b] where it is clear, else c[l] (16 + k picks c[k]).
  round(8, I32x16{0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23},
        I32x16{8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31});
  round(4, I32x16{0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27},
        I32x16{4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31});
  round(2, I32x16{0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
        I32x16{2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31});
  round(1, I32x16{0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30},
        I32x16{1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31});
}

// Sample b's features transposed: transposed[d * stride + j] = x_j[d], and
// zero in the padding lanes j >= F. For dims that are multiples of 16 (DLRM's
// usual 16 to 128) in 16x16 blocks in registers instead of a scalar load and
// store per element (with the prefetch below: the forward 2.64% -> 2.07% of
// the DLRM 2-thread profile; its loads mostly waited on memory).
[[gnu::always_inline]] inline void TransposeSample(const Features<const float>& x, int64_t b,
                                                   int64_t stride, float* transposed) {
  const int64_t num_features = x.num_features, dim = x.dim;
  if (dim % kLanes != 0) {
    for (int64_t j = 0; j < num_features; ++j) {
      const float* xj = x.Row(b, j);
      for (int64_t d = 0; d < dim; ++d) transposed[d * stride + j] = xj[d];
    }
    return;  // The caller zeroed the padding.
  }
  F32x16 block[kLanes];
  for (int64_t j0 = 0; j0 < stride; j0 += kLanes) {
    for (int64_t d0 = 0; d0 < dim; d0 += kLanes) {
      for (int64_t k = 0; k < kLanes; ++k) {
        block[k] = j0 + k < num_features ? LoadF32x16(x.Row(b, j0 + k) + d0) : F32x16{};
      }
      Transpose16x16(block);
      for (int64_t k = 0; k < kLanes; ++k) {
        StoreF32x16(transposed + (d0 + k) * stride + j0, block[k]);
      }
    }
  }
}

// Starts loading sample b's features. The kernels run a few samples behind:
// their loads otherwise wait on memory (the pooled embeddings and the bottom
// MLP's output were written long before).
[[gnu::always_inline]] inline void PrefetchSample(const Features<const float>& x, int64_t b) {
  for (int64_t j = 0; j < x.num_features; ++j) {
    const float* row = x.Row(b, j);
    for (int64_t d = 0; d < x.dim; d += kLanes) __builtin_prefetch(row + d);
  }
}

// Forward for samples [begin, end). Each sample is transposed into
// `transposed` (dim rows of RoundUpToLanes(F) floats, padding zeroed), so
// that the dots of feature i with features j0..j0+15 are the lanes of one
// vector: lane j adds x_i[d] * x_j[d] for d = 0, 1, ... in order, the same
// sum as a scalar dot product. Rows i > j0 that share a block j0 run in
// groups of kGroup.
EMBER_MULTIVERSIONED
void DotForwardSamples(const Features<const float>& x, int64_t begin, int64_t end,
                       float* transposed, const Columns<float>& out) {
  const int64_t num_features = x.num_features, dim = x.dim;
  const int64_t stride = RoundUpToLanes(num_features);
  // The padding lanes are zero (the buffer may hold another shape's rows);
  // the samples below write only the first num_features of each row.
  for (int64_t d = 0; d < dim; ++d) {
    std::fill(transposed + d * stride + num_features, transposed + (d + 1) * stride, 0.0f);
  }
  const float* xi[kGroup];
  F32x16 dots[kGroup];
  for (int64_t b = begin; b < end; ++b) {
    if (b + kPrefetchSamples < end) PrefetchSample(x, b + kPrefetchSamples);
    TransposeSample(x, b, stride, transposed);
    float* dst = out.Row(b);
    for (int64_t j0 = 0; j0 < num_features; j0 += kLanes) {
      const float* column = transposed + j0;
      for (int64_t i0 = j0 + 1; i0 < num_features; i0 += kGroup) {
        const int64_t rows = std::min(kGroup, num_features - i0);
        for (int64_t k = 0; k < rows; ++k) xi[k] = x.Row(b, i0 + k);
        if (rows == kGroup) {
          DotGroup<kGroup>(xi, column, stride, dim, dots);
        } else {
          // The last group of a block: the rest in groups of 4, 2 and 1.
          int64_t k = 0;
          if (rows - k >= 4) DotGroup<4>(xi + k, column, stride, dim, dots + k), k += 4;
          if (rows - k >= 2) DotGroup<2>(xi + k, column, stride, dim, dots + k), k += 2;
          if (rows - k >= 1) DotGroup<1>(xi + k, column, stride, dim, dots + k);
        }
        // Row i's pairs (i, j0..) start at column i (i - 1) / 2 + j0.
        for (int64_t k = 0; k < rows; ++k) {
          const int64_t i = i0 + k;
          float* row = dst + i * (i - 1) / 2 + j0;
          const int64_t n = std::min(kLanes, i - j0);
          if (n == kLanes) {
            StoreF32x16(row, dots[k]);
          } else {
            for (int64_t l = 0; l < n; ++l) row[l] = dots[k][l];
          }
        }
      }
    }
  }
}

// dF_i[d0..d0+15] for the G rows i0..i0+G-1: init (or zero), then for j =
// 0, 1, ... (skipping j = i) the coefficient of pair (i, j) times F_j. Pair
// (i, j) with j < i is g[i (i - 1) / 2 + j]. The j below, inside and above
// the group are three loops so that no lane tests j against i.
template <int64_t G>
[[gnu::always_inline]] inline void DotBackwardGroup(const Features<const float>& x, int64_t b,
                                                    const float* g, const float* const* init,
                                                    int64_t i0, int64_t d0, float* const* dst) {
  auto row_start = [](int64_t i) { return i * (i - 1) / 2; };
  F32x16 acc[G];
#pragma GCC unroll 8
  for (int64_t k = 0; k < G; ++k) acc[k] = init[k] != nullptr ? LoadF32x16(init[k] + d0) : F32x16{};
  const float* below[G];  // below[k][j]: pair (i0 + k, j) for j < i0 + k
#pragma GCC unroll 8
  for (int64_t k = 0; k < G; ++k) below[k] = g + row_start(i0 + k);
  for (int64_t j = 0; j < i0; ++j) {
    const F32x16 xj = LoadF32x16(x.Row(b, j) + d0);
#pragma GCC unroll 8
    for (int64_t k = 0; k < G; ++k) acc[k] += BroadcastF32x16(below[k][j]) * xj;
  }
#pragma GCC unroll 8
  for (int64_t jj = 0; jj < G; ++jj) {
    const F32x16 xj = LoadF32x16(x.Row(b, i0 + jj) + d0);
#pragma GCC unroll 8
    for (int64_t k = 0; k < G; ++k) {
      if (jj < k) acc[k] += BroadcastF32x16(below[k][i0 + jj]) * xj;
      if (jj > k) acc[k] += BroadcastF32x16(g[row_start(i0 + jj) + i0 + k]) * xj;
    }
  }
  for (int64_t j = i0 + G; j < x.num_features; ++j) {
    const F32x16 xj = LoadF32x16(x.Row(b, j) + d0);
    const float* above = g + row_start(j) + i0;  // pairs (j, i0 + k)
#pragma GCC unroll 8
    for (int64_t k = 0; k < G; ++k) acc[k] += BroadcastF32x16(above[k]) * xj;
  }
#pragma GCC unroll 8
  for (int64_t k = 0; k < G; ++k) StoreF32x16(dst[k] + d0, acc[k]);
}

// Backward for samples [begin, end): dF_i = init_i + the sum over j != i, in
// increasing j, of dout_{max(i,j),min(i,j)} * F_j, 16 elements of dF_i at a
// time for kGroup rows i at once. Pair (i, j) with j < i is
// dout[i (i - 1) / 2 + j]. init_i is the row of `passthrough` for the head
// features when it is given, else zero.
EMBER_MULTIVERSIONED
void DotBackwardSamples(const Features<const float>& x, const Columns<const float>& dout,
                        const Columns<const float>& passthrough, int64_t begin, int64_t end,
                        const Features<float>& dx) {
  const int64_t num_features = x.num_features, dim = x.dim;
  auto row_start = [](int64_t i) { return i * (i - 1) / 2; };
  const float* init[kGroup];
  float* dst[kGroup];
  const int64_t pairs = num_features * (num_features - 1) / 2;
  for (int64_t b = begin; b < end; ++b) {
    if (b + kPrefetchSamples < end) {
      PrefetchSample(x, b + kPrefetchSamples);
      const float* ahead = dout.Row(b + kPrefetchSamples);
      for (int64_t p = 0; p < pairs; p += kLanes) __builtin_prefetch(ahead + p);
    }
    const float* g = dout.Row(b);
    for (int64_t i0 = 0; i0 < num_features; i0 += kGroup) {
      const int64_t rows = std::min(kGroup, num_features - i0);
      for (int64_t k = 0; k < rows; ++k) {
        const int64_t i = i0 + k;
        init[k] = passthrough.data != nullptr && i < x.head_count ? passthrough.Row(b) + i * dim
                                                                  : nullptr;
        dst[k] = dx.Row(b, i);
      }
      for (int64_t d0 = 0; d0 + kLanes <= dim; d0 += kLanes) {
        if (rows == kGroup) {
          DotBackwardGroup<kGroup>(x, b, g, init, i0, d0, dst);
        } else {
          int64_t k = 0;
          if (rows - k >= 4) DotBackwardGroup<4>(x, b, g, init + k, i0 + k, d0, dst + k), k += 4;
          if (rows - k >= 2) DotBackwardGroup<2>(x, b, g, init + k, i0 + k, d0, dst + k), k += 2;
          if (rows - k >= 1) DotBackwardGroup<1>(x, b, g, init + k, i0 + k, d0, dst + k);
        }
      }
    }
    // The elements past the last whole block of 16, one at a time (none for
    // dims that are multiples of 16, DLRM's usual 16 to 128).
    const int64_t tail = dim / kLanes * kLanes;
    for (int64_t i = 0; tail < dim && i < num_features; ++i) {
      const float* gi = g + row_start(i);  // dout_{i,j} for j < i
      const float* init_i =
          passthrough.data != nullptr && i < x.head_count ? passthrough.Row(b) + i * dim : nullptr;
      float* dst_i = dx.Row(b, i);
      for (int64_t d = tail; d < dim; ++d) {
        float acc = init_i != nullptr ? init_i[d] : 0.0f;
        for (int64_t j = 0; j < i; ++j) acc += gi[j] * x.Row(b, j)[d];
        for (int64_t j = i + 1; j < num_features; ++j) acc += g[row_start(j) + i] * x.Row(b, j)[d];
        dst_i[d] = acc;
      }
    }
  }
}

void DotForward(const Features<const float>& x, int64_t batch, const Columns<float>& out) {
  ParallelFor(0, batch, SampleGrain(x.num_features, x.dim), [&](int64_t begin, int64_t end) {
    // A chunk is a few samples: the buffer is the thread's, kept between
    // chunks and calls rather than allocated for each.
    thread_local std::vector<float> transposed;
    const size_t floats = static_cast<size_t>(x.dim * RoundUpToLanes(x.num_features));
    if (transposed.size() < floats) transposed.resize(floats);
    DotForwardSamples(x, begin, end, transposed.data(), out);
  });
}

void DotBackward(const Features<const float>& x, int64_t batch, const Columns<const float>& dout,
                 const Columns<const float>& passthrough, const Features<float>& dx) {
  ParallelFor(0, batch, SampleGrain(x.num_features, x.dim), [&](int64_t begin, int64_t end) {
    DotBackwardSamples(x, dout, passthrough, begin, end, dx);
  });
}

}  // namespace

Status DotInteractionForward(const Tensor& features, Tensor* out) {
  constexpr const char* kOp = "DotInteractionForward";
  EMBER_RETURN_IF_ERROR(CheckRank(kOp, "features", features, DType::kF32, 3));
  const int64_t batch = features.dim(0), num_features = features.dim(1), dim = features.dim(2);
  const int64_t pairs = num_features * (num_features - 1) / 2;
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "out", out, DType::kF32, {batch, pairs}));
  const Features<const float> x{features.data<float>(), nullptr, num_features, num_features, dim};
  DotForward(x, batch, {out->data<float>(), pairs, 0});
  return Status::OK();
}

Status DotInteractionBackward(const Tensor& features, const Tensor& dout, Tensor* dfeatures) {
  constexpr const char* kOp = "DotInteractionBackward";
  EMBER_RETURN_IF_ERROR(CheckRank(kOp, "features", features, DType::kF32, 3));
  const int64_t batch = features.dim(0), num_features = features.dim(1), dim = features.dim(2);
  const int64_t pairs = num_features * (num_features - 1) / 2;
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "dout", dout, DType::kF32, {batch, pairs}));
  EMBER_RETURN_IF_ERROR(
      CheckOutput(kOp, "dfeatures", dfeatures, DType::kF32, {batch, num_features, dim}));
  const Features<const float> x{features.data<float>(), nullptr, num_features, num_features, dim};
  const Features<float> dx{dfeatures->data<float>(), nullptr, num_features, num_features, dim};
  DotBackward(x, batch, {dout.data<float>(), pairs, 0}, {}, dx);
  return Status::OK();
}

namespace {

// The shapes of DLRM's layer: direct[B, D], pooled[B, S*D], out[B, D + F(F-1)/2]
// with F = S + 1.
struct DlrmShape {
  int64_t batch = 0, dim = 0, num_features = 0, width = 0;
};

Result<DlrmShape> CheckDlrm(const char* op, const Tensor& direct, const Tensor& pooled) {
  EMBER_RETURN_IF_ERROR(CheckRank(op, "direct", direct, DType::kF32, 2));
  EMBER_RETURN_IF_ERROR(CheckRank(op, "pooled", pooled, DType::kF32, 2));
  DlrmShape shape;
  shape.batch = direct.dim(0);
  shape.dim = direct.dim(1);
  if (shape.dim < 1 || pooled.dim(0) != shape.batch || pooled.dim(1) % shape.dim != 0) {
    return Status::InvalidArgument(op, ": pooled ", pooled.DebugString(),
                                   " must be [B, S * D] for direct ", direct.DebugString());
  }
  shape.num_features = pooled.dim(1) / shape.dim + 1;
  shape.width = shape.dim + shape.num_features * (shape.num_features - 1) / 2;
  return shape;
}

}  // namespace

Status DlrmInteractionForward(const Tensor& direct, const Tensor& pooled, Tensor* out) {
  constexpr const char* kOp = "DlrmInteractionForward";
  EMBER_ASSIGN_OR_RETURN(const DlrmShape n, CheckDlrm(kOp, direct, pooled));
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "out", out, DType::kF32, {n.batch, n.width}));
  const float* d = direct.data<float>();
  float* o = out->data<float>();
  for (int64_t b = 0; b < n.batch; ++b) {
    std::memcpy(o + b * n.width, d + b * n.dim, static_cast<size_t>(n.dim) * sizeof(float));
  }
  const Features<const float> x{d, pooled.data<float>(), 1, n.num_features, n.dim};
  DotForward(x, n.batch, {o, n.width, n.dim});
  return Status::OK();
}

Status DlrmInteractionBackward(const Tensor& direct, const Tensor& pooled, const Tensor& dout,
                               Tensor* ddirect, Tensor* dpooled) {
  constexpr const char* kOp = "DlrmInteractionBackward";
  EMBER_ASSIGN_OR_RETURN(const DlrmShape n, CheckDlrm(kOp, direct, pooled));
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "dout", dout, DType::kF32, {n.batch, n.width}));
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "ddirect", ddirect, DType::kF32, direct.shape()));
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "dpooled", dpooled, DType::kF32, pooled.shape()));
  const Features<const float> x{direct.data<float>(), pooled.data<float>(), 1, n.num_features,
                                n.dim};
  const Features<float> dx{ddirect->data<float>(), dpooled->data<float>(), 1, n.num_features,
                           n.dim};
  const float* g = dout.data<float>();
  DotBackward(x, n.batch, {g, n.width, n.dim}, {g, n.width, 0}, dx);
  return Status::OK();
}

}  // namespace ember::ops
