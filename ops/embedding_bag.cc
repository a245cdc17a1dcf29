// Embedding-bag pooling (sum or mean of the rows of each bag) and its gradient.
// The gradient of a row sums the gradients of the bags that hold it in the
// order of row_index, whatever the thread count (ARCHITECTURE.md, Determinism).

#include "ops/dense_ops.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

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
  for (int64_t b = 0; b < num_bags; ++b) {
    if (off[b + 1] < off[b]) {
      return Status::InvalidArgument(op, ": offsets decrease at bag ", b, " (", off[b], " then ",
                                     off[b + 1], ")");
    }
  }
  if (off[num_bags] != nnz) {
    return Status::InvalidArgument(op, ": offsets[", num_bags, "] = ", off[num_bags],
                                   " but row_index holds ", nnz, " values");
  }
  const int64_t* idx = row_index.data<int64_t>();
  for (int64_t p = 0; p < nnz; ++p) {
    if (idx[p] < 0 || idx[p] >= num_rows) {
      return Status::InvalidArgument(op, ": row_index[", p, "] = ", idx[p], " is outside [0, ",
                                     num_rows, ")");
    }
  }
  return Status::OK();
}

// What a bag's sum is divided by: its size for a non-empty mean, else 1.
float BagDivisor(Pooling pooling, int64_t bag_size) {
  return pooling == Pooling::kMean && bag_size > 0 ? static_cast<float>(bag_size) : 1.0f;
}

// The bags of each row in row_index order, as CSR: the bags of row u are
// bags[starts[u] .. starts[u+1]). Built by a stable counting sort.
struct RowToBags {
  std::vector<int64_t> starts;
  std::vector<int64_t> bags;
};

RowToBags TransposeBags(const int64_t* idx, const int64_t* off, int64_t num_bags,
                        int64_t num_rows) {
  RowToBags t;
  t.starts.assign(static_cast<size_t>(num_rows) + 1, 0);
  t.bags.resize(static_cast<size_t>(off[num_bags]));
  for (int64_t p = 0; p < off[num_bags]; ++p) ++t.starts[idx[p] + 1];
  for (int64_t u = 0; u < num_rows; ++u) t.starts[u + 1] += t.starts[u];
  std::vector<int64_t> cursor(t.starts.begin(), t.starts.end() - 1);
  for (int64_t b = 0; b < num_bags; ++b) {
    for (int64_t p = off[b]; p < off[b + 1]; ++p) t.bags[cursor[idx[p]]++] = b;
  }
  return t;
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
    for (int64_t b = begin; b < end; ++b) {
      float* dst = o + b * dim;
      std::memset(dst, 0, static_cast<size_t>(dim) * sizeof(float));
      for (int64_t p = off[b]; p < off[b + 1]; ++p) {
        const float* row = table + idx[p] * dim;
        for (int64_t d = 0; d < dim; ++d) dst[d] += row[d];
      }
      const float divisor = BagDivisor(pooling, off[b + 1] - off[b]);
      if (divisor != 1.0f) {
        for (int64_t d = 0; d < dim; ++d) dst[d] /= divisor;
      }
    }
  });
  return Status::OK();
}

Status EmbeddingBagBackward(const Tensor& dout, const Tensor& row_index, const Tensor& offsets,
                            Pooling pooling, Tensor* drows) {
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
  const RowToBags row_bags = TransposeBags(row_index.data<int64_t>(), off, num_bags, num_rows);
  const float* g = dout.data<float>();
  float* dr = drows->data<float>();
  const int64_t grain = Grain(num_rows, row_index.dim(0) * dim);
  // One thread owns each row, and adds its bags in row_index order: the sum
  // is the same for any thread count.
  ParallelFor(0, num_rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      float* dst = dr + u * dim;
      std::memset(dst, 0, static_cast<size_t>(dim) * sizeof(float));
      for (int64_t k = row_bags.starts[u]; k < row_bags.starts[u + 1]; ++k) {
        const int64_t b = row_bags.bags[k];
        const float divisor = BagDivisor(pooling, off[b + 1] - off[b]);
        const float* src = g + b * dim;
        if (divisor == 1.0f) {
          for (int64_t d = 0; d < dim; ++d) dst[d] += src[d];
        } else {
          for (int64_t d = 0; d < dim; ++d) dst[d] += src[d] / divisor;
        }
      }
    }
  });
  return Status::OK();
}

}  // namespace ember::ops
