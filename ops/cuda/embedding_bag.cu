// Embedding-bag pooling on CUDA. The forward gives each (bag, column) one
// thread that sums the bag's rows in row_index order. The backward avoids
// atomics: a stable radix sort of the positions by row turns the bags into
// a CSR of the positions of each row in row_index order, and each (row,
// column) thread then sums its bags in that order, exactly as the CPU
// operator does, so the gradients are the same bits on both.

#include <cub/device/device_radix_sort.cuh>

#include "ops/cuda/common.h"
#include "ops/dense_ops_cuda.h"

namespace ember::ops {
namespace {

using cuda::DeviceScratch;

constexpr int kThreads = 256;

// What a bag's sum is divided by, as the CPU operator's BagDivisor.
__device__ float BagDivisor(int mean, int64_t bag_size) {
  return mean && bag_size > 0 ? static_cast<float>(bag_size) : 1.0f;
}

__global__ void PoolKernel(const float* rows, int64_t num_rows, const int64_t* idx, int64_t nnz,
                           const int64_t* off, int64_t num_bags, int64_t dim, int mean,
                           float* out) {
  const int64_t n = num_bags * dim;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = t / dim, d = t % dim;
    const int64_t begin = off[b] < 0 ? 0 : off[b];
    const int64_t end = off[b + 1] > nnz ? nnz : off[b + 1];
    float sum = 0.0f;
    for (int64_t p = begin; p < end; ++p) {
      const int64_t row = idx[p];
      if (row >= 0 && row < num_rows) sum += rows[row * dim + d];
    }
    const float divisor = BagDivisor(mean, off[b + 1] - off[b]);
    out[t] = divisor != 1.0f ? sum / divisor : sum;
  }
}

// keys[p] = row_index[p], with indices out of range mapped to num_rows (they
// sort last and belong to no row); positions[p] = p.
__global__ void SortInputKernel(const int64_t* idx, int64_t nnz, int64_t num_rows, int64_t* keys,
                                int32_t* positions) {
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < nnz;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = idx[p];
    keys[p] = row >= 0 && row < num_rows ? row : num_rows;
    positions[p] = static_cast<int32_t>(p);
  }
}

// bags[k] = the bag holding position sorted_positions[k]: the last b with
// off[b] <= p (binary search), or -1 if there is none in [0, num_bags).
__global__ void BagOfPositionKernel(const int32_t* sorted_positions, int64_t nnz,
                                    const int64_t* off, int64_t num_bags, int32_t* bags) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < nnz;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t p = sorted_positions[k];
    int64_t lo = 0, hi = num_bags + 1;  // upper_bound of p in off[0, num_bags]
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (off[mid] <= p) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    const int64_t b = lo - 1;
    bags[k] = b >= 0 && b < num_bags ? static_cast<int32_t>(b) : -1;
  }
}

// starts[u] = the first k with sorted_keys[k] >= u, for u in [0, num_rows].
__global__ void RowStartsKernel(const int64_t* sorted_keys, int64_t nnz, int64_t num_rows,
                                int64_t* starts) {
  for (int64_t u = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; u <= num_rows;
       u += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t lo = 0, hi = nnz;
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (sorted_keys[mid] < u) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    starts[u] = lo;
  }
}

__global__ void RowGradientKernel(const float* dout, const int64_t* off, const int64_t* starts,
                                  const int32_t* bags, int64_t num_rows, int64_t dim, int mean,
                                  float* drows) {
  const int64_t n = num_rows * dim;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t u = t / dim, d = t % dim;
    float sum = 0.0f;
    for (int64_t k = starts[u]; k < starts[u + 1]; ++k) {
      const int32_t b = bags[k];
      if (b < 0) continue;
      const float divisor = BagDivisor(mean, off[b + 1] - off[b]);
      const float g = dout[b * dim + d];
      // The CPU operator's order and rounding: one add of g / divisor per bag.
      sum += divisor == 1.0f ? g : g / divisor;
    }
    drows[t] = sum;
  }
}

int KeyBits(int64_t max_key) {
  int bits = 1;
  while (bits < 63 && (int64_t{1} << bits) <= max_key) ++bits;
  return bits;
}

Status CheckBagShapes(const char* op, const Tensor& row_index, const Tensor& offsets,
                      const Device& device) {
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceRank(op, "row_index", row_index, DType::kI64, 1, device));
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceRank(op, "offsets", offsets, DType::kI64, 1, device));
  if (offsets.dim(0) < 1) {
    return Status::InvalidArgument(op, ": offsets must hold num_bags + 1 >= 1 values, got ",
                                   offsets.DebugString());
  }
  return Status::OK();
}

}  // namespace

Status EmbeddingBagForwardCuda(const Tensor& rows, const Tensor& row_index, const Tensor& offsets,
                               Pooling pooling, Tensor* out, CudaStream& stream) {
  constexpr const char* kOp = "EmbeddingBagForwardCuda";
  const Device device = Device::Cuda(stream.device());
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceRank(kOp, "rows", rows, DType::kF32, 2, device));
  EMBER_RETURN_IF_ERROR(CheckBagShapes(kOp, row_index, offsets, device));
  const int64_t dim = rows.dim(1), num_bags = offsets.dim(0) - 1;
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceOutput(kOp, "out", out, DType::kF32, {num_bags, dim}, device));
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  const int64_t n = num_bags * dim;
  if (n == 0) return Status::OK();
  PoolKernel<<<cuda::GridFor(n, kThreads), kThreads, 0, cuda::Native(stream)>>>(
      rows.data<float>(), rows.dim(0), row_index.data<int64_t>(), row_index.dim(0),
      offsets.data<int64_t>(), num_bags, dim, pooling == Pooling::kMean ? 1 : 0,
      out->data<float>());
  return cuda::CheckLaunch(kOp, "PoolKernel");
}

Status EmbeddingBagBackwardCuda(const Tensor& dout, const Tensor& row_index,
                                const Tensor& offsets, Pooling pooling, Tensor* drows,
                                CudaStream& stream) {
  constexpr const char* kOp = "EmbeddingBagBackwardCuda";
  const Device device = Device::Cuda(stream.device());
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceRank(kOp, "dout", dout, DType::kF32, 2, device));
  if (drows == nullptr) return Status::InvalidArgument(kOp, ": drows is null");
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceRank(kOp, "drows", *drows, DType::kF32, 2, device));
  const int64_t num_rows = drows->dim(0), dim = dout.dim(1);
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceOutput(kOp, "drows", drows, DType::kF32, {num_rows, dim}, device));
  EMBER_RETURN_IF_ERROR(CheckBagShapes(kOp, row_index, offsets, device));
  const int64_t num_bags = offsets.dim(0) - 1, nnz = row_index.dim(0);
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceTensor(kOp, "dout", dout, DType::kF32, {num_bags, dim}, device));
  EMBER_RETURN_IF_ERROR(cuda::CheckFitsInt(kOp, "the number of row indices", nnz));
  EMBER_RETURN_IF_ERROR(cuda::CheckFitsInt(kOp, "the number of bags", num_bags));
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  const cudaStream_t s = cuda::Native(stream);
  if (num_rows * dim == 0) return Status::OK();
  if (nnz == 0) {
    return cuda::CudaCall(
        cudaMemsetAsync(drows->raw_data(), 0, static_cast<size_t>(num_rows * dim) * 4, s), kOp,
        "cudaMemsetAsync");
  }
  DeviceScratch scratch(stream);
  EMBER_ASSIGN_OR_RETURN(int64_t * keys, scratch.Get<int64_t>(kOp, nnz));
  EMBER_ASSIGN_OR_RETURN(int64_t * sorted_keys, scratch.Get<int64_t>(kOp, nnz));
  EMBER_ASSIGN_OR_RETURN(int32_t * positions, scratch.Get<int32_t>(kOp, nnz));
  EMBER_ASSIGN_OR_RETURN(int32_t * sorted_positions, scratch.Get<int32_t>(kOp, nnz));
  EMBER_ASSIGN_OR_RETURN(int32_t * bags, scratch.Get<int32_t>(kOp, nnz));
  EMBER_ASSIGN_OR_RETURN(int64_t * starts, scratch.Get<int64_t>(kOp, num_rows + 1));
  SortInputKernel<<<cuda::GridFor(nnz, kThreads), kThreads, 0, s>>>(
      row_index.data<int64_t>(), nnz, num_rows, keys, positions);
  EMBER_RETURN_IF_ERROR(cuda::CheckLaunch(kOp, "SortInputKernel"));
  // LSD radix sort: stable, so the positions of a row stay in row_index order.
  const int end_bit = KeyBits(num_rows);
  size_t temp_bytes = 0;
  EMBER_RETURN_IF_ERROR(cuda::CudaCall(
      cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys, sorted_keys, positions,
                                      sorted_positions, static_cast<int>(nnz), 0, end_bit, s),
      kOp, "cub::DeviceRadixSort (size)"));
  EMBER_ASSIGN_OR_RETURN(uint8_t * temp,
                         scratch.Get<uint8_t>(kOp, static_cast<int64_t>(temp_bytes)));
  EMBER_RETURN_IF_ERROR(cuda::CudaCall(
      cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys, sorted_keys, positions,
                                      sorted_positions, static_cast<int>(nnz), 0, end_bit, s),
      kOp, "cub::DeviceRadixSort"));
  BagOfPositionKernel<<<cuda::GridFor(nnz, kThreads), kThreads, 0, s>>>(
      sorted_positions, nnz, offsets.data<int64_t>(), num_bags, bags);
  EMBER_RETURN_IF_ERROR(cuda::CheckLaunch(kOp, "BagOfPositionKernel"));
  RowStartsKernel<<<cuda::GridFor(num_rows + 1, kThreads), kThreads, 0, s>>>(sorted_keys, nnz,
                                                                             num_rows, starts);
  EMBER_RETURN_IF_ERROR(cuda::CheckLaunch(kOp, "RowStartsKernel"));
  RowGradientKernel<<<cuda::GridFor(num_rows * dim, kThreads), kThreads, 0, s>>>(
      dout.data<float>(), offsets.data<int64_t>(), starts, bags, num_rows, dim,
      pooling == Pooling::kMean ? 1 : 0, drows->data<float>());
  return cuda::CheckLaunch(kOp, "RowGradientKernel");
}

}  // namespace ember::ops
