// Column concatenation of [B, width] blocks and its inverse.

#include "ops/dense_ops.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/threads.h"
#include "ops/internal/tensor_checks.h"

namespace ember::ops {
namespace {

// Rows per parallel chunk: enough copying per chunk to pay for the task.
int64_t RowGrain(int64_t width) {
  return std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(1, width));
}

// Checks that every block is a host f32 [batch, width_k] tensor and returns
// the sum of the widths.
Result<int64_t> CheckBlocks(const char* op, const char* name, const std::vector<Tensor>& blocks,
                            int64_t batch) {
  int64_t total = 0;
  for (size_t k = 0; k < blocks.size(); ++k) {
    const std::string block_name = std::string(name) + "[" + std::to_string(k) + "]";
    EMBER_RETURN_IF_ERROR(CheckRank(op, block_name.c_str(), blocks[k], DType::kF32, 2));
    EMBER_RETURN_IF_ERROR(
        CheckTensor(op, block_name.c_str(), blocks[k], DType::kF32, {batch, blocks[k].dim(1)}));
    total += blocks[k].dim(1);
  }
  return total;
}

// Copies between the packed matrix and the blocks: to_blocks chooses the direction.
void CopyColumns(const std::vector<Tensor>& blocks, float* packed, int64_t batch, int64_t total,
                 bool to_blocks) {
  ParallelFor(0, batch, RowGrain(total), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t column = 0;
      for (const Tensor& block : blocks) {
        const int64_t width = block.dim(1);
        float* block_row = block.data<float>() + r * width;
        float* packed_row = packed + r * total + column;
        const size_t bytes = static_cast<size_t>(width) * sizeof(float);
        if (to_blocks) {
          std::memcpy(block_row, packed_row, bytes);
        } else {
          std::memcpy(packed_row, block_row, bytes);
        }
        column += width;
      }
    }
  });
}

}  // namespace

Status ConcatColumns(const std::vector<Tensor>& inputs, Tensor* out) {
  constexpr const char* kOp = "ConcatColumns";
  if (inputs.empty()) return Status::InvalidArgument(kOp, ": inputs is empty");
  EMBER_RETURN_IF_ERROR(CheckRank(kOp, "inputs[0]", inputs[0], DType::kF32, 2));
  const int64_t batch = inputs[0].dim(0);
  EMBER_ASSIGN_OR_RETURN(const int64_t total, CheckBlocks(kOp, "inputs", inputs, batch));
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "out", out, DType::kF32, {batch, total}));
  CopyColumns(inputs, out->data<float>(), batch, total, /*to_blocks=*/false);
  return Status::OK();
}

Status SplitColumns(const Tensor& din, std::vector<Tensor>* outputs) {
  constexpr const char* kOp = "SplitColumns";
  EMBER_RETURN_IF_ERROR(CheckRank(kOp, "din", din, DType::kF32, 2));
  if (outputs == nullptr || outputs->empty()) {
    return Status::InvalidArgument(kOp, ": outputs must hold the caller's [B, width_k] tensors");
  }
  const int64_t batch = din.dim(0);
  EMBER_ASSIGN_OR_RETURN(const int64_t total, CheckBlocks(kOp, "outputs", *outputs, batch));
  if (total != din.dim(1)) {
    return Status::InvalidArgument(kOp, ": the widths of outputs add up to ", total, " but din is ",
                                   din.DebugString());
  }
  CopyColumns(*outputs, din.data<float>(), batch, total, /*to_blocks=*/true);
  return Status::OK();
}

}  // namespace ember::ops
