// Column concatenation on CUDA: one pitched device-to-device copy per block
// (cudaMemcpy2DAsync), which the copy engines run at memory bandwidth.

#include <string>

#include "ops/cuda/common.h"
#include "ops/dense_ops_cuda.h"

namespace ember::ops {
namespace {

// Checks that every block is f32 [batch, width_k] on `device` and returns the
// sum of the widths.
Result<int64_t> CheckBlocks(const char* op, const char* name, const std::vector<Tensor>& blocks,
                            int64_t batch, const Device& device) {
  int64_t total = 0;
  for (size_t k = 0; k < blocks.size(); ++k) {
    const std::string block_name = std::string(name) + "[" + std::to_string(k) + "]";
    EMBER_RETURN_IF_ERROR(
        cuda::CheckDeviceRank(op, block_name.c_str(), blocks[k], DType::kF32, 2, device));
    EMBER_RETURN_IF_ERROR(cuda::CheckDeviceTensor(op, block_name.c_str(), blocks[k], DType::kF32,
                                                  {batch, blocks[k].dim(1)}, device));
    total += blocks[k].dim(1);
  }
  return total;
}

// Copies between the packed [batch, total] matrix and the blocks.
Status CopyColumns(const char* op, const std::vector<Tensor>& blocks, float* packed,
                   int64_t batch, int64_t total, bool to_blocks, cudaStream_t stream) {
  int64_t column = 0;
  for (const Tensor& block : blocks) {
    const int64_t width = block.dim(1);
    if (width > 0 && batch > 0) {
      const size_t packed_pitch = static_cast<size_t>(total) * sizeof(float);
      const size_t block_pitch = static_cast<size_t>(width) * sizeof(float);
      float* packed_at = packed + column;
      const cudaError_t error =
          to_blocks ? cudaMemcpy2DAsync(block.raw_data(), block_pitch, packed_at, packed_pitch,
                                        block_pitch, static_cast<size_t>(batch),
                                        cudaMemcpyDeviceToDevice, stream)
                    : cudaMemcpy2DAsync(packed_at, packed_pitch, block.raw_data(), block_pitch,
                                        block_pitch, static_cast<size_t>(batch),
                                        cudaMemcpyDeviceToDevice, stream);
      EMBER_RETURN_IF_ERROR(cuda::CudaCall(error, op, "cudaMemcpy2DAsync"));
    }
    column += width;
  }
  return Status::OK();
}

}  // namespace

Status ConcatColumnsCuda(const std::vector<Tensor>& inputs, Tensor* out, CudaStream& stream) {
  constexpr const char* kOp = "ConcatColumnsCuda";
  const Device device = Device::Cuda(stream.device());
  if (inputs.empty()) return Status::InvalidArgument(kOp, ": inputs is empty");
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceRank(kOp, "inputs[0]", inputs[0], DType::kF32, 2, device));
  const int64_t batch = inputs[0].dim(0);
  EMBER_ASSIGN_OR_RETURN(const int64_t total, CheckBlocks(kOp, "inputs", inputs, batch, device));
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceOutput(kOp, "out", out, DType::kF32, {batch, total}, device));
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  return CopyColumns(kOp, inputs, out->data<float>(), batch, total, /*to_blocks=*/false,
                     cuda::Native(stream));
}

Status SplitColumnsCuda(const Tensor& din, std::vector<Tensor>* outputs, CudaStream& stream) {
  constexpr const char* kOp = "SplitColumnsCuda";
  const Device device = Device::Cuda(stream.device());
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceRank(kOp, "din", din, DType::kF32, 2, device));
  if (outputs == nullptr || outputs->empty()) {
    return Status::InvalidArgument(kOp, ": outputs must hold the caller's [B, width_k] tensors");
  }
  const int64_t batch = din.dim(0);
  EMBER_ASSIGN_OR_RETURN(const int64_t total,
                         CheckBlocks(kOp, "outputs", *outputs, batch, device));
  if (total != din.dim(1)) {
    return Status::InvalidArgument(kOp, ": the widths of outputs add up to ", total,
                                   " but din is ", din.DebugString());
  }
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  return CopyColumns(kOp, *outputs, din.data<float>(), batch, total, /*to_blocks=*/true,
                     cuda::Native(stream));
}

}  // namespace ember::ops
