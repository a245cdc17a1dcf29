#include "core/tensor_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/threads.h"

namespace ember {
namespace {

// OK when `t` lives on the host or on the device of `stream`.
Status CheckReachable(const char* what, const Tensor& t, const CudaStream* stream) {
  if (t.device().is_cpu()) return Status::OK();
  if (stream == nullptr) {
    return Status::InvalidArgument(what, " is ", t.DebugString(), " but no CUDA stream was given");
  }
  if (t.device() != Device::Cuda(stream->device())) {
    return Status::InvalidArgument(what, " is ", t.DebugString(),
                                   ", the stream runs on cuda:", stream->device());
  }
  return Status::OK();
}

// Host copies and fills of a step's large tensors (an activation or gradient
// of megabytes) run in parallel chunks in the caller's arena: one core's
// memcpy reaches about half of this machine's copy bandwidth.
constexpr int64_t kParallelChunkBytes = int64_t{256} << 10;

void HostCopy(const void* src, void* dst, size_t bytes) {
  const auto* from = static_cast<const char*>(src);
  auto* to = static_cast<char*>(dst);
  const int64_t n = static_cast<int64_t>(bytes);
  ParallelFor(0, n, kParallelChunkBytes, [&](int64_t begin, int64_t end) {
    std::memcpy(to + begin, from + begin, static_cast<size_t>(end - begin));
  });
}

void HostZero(void* dst, size_t bytes) {
  auto* to = static_cast<char*>(dst);
  ParallelFor(0, static_cast<int64_t>(bytes), kParallelChunkBytes, [&](int64_t begin, int64_t end) {
    std::memset(to + begin, 0, static_cast<size_t>(end - begin));
  });
}

}  // namespace

Status CopyTensor(const Tensor& src, Tensor* dst, CudaStream* stream) {
  if (!src.defined() || dst == nullptr || !dst->defined() || src.dtype() != dst->dtype() ||
      src.numel() != dst->numel()) {
    return Status::InvalidArgument("CopyTensor: cannot copy ", src.DebugString(), " into ",
                                   dst == nullptr ? std::string("null") : dst->DebugString());
  }
  EMBER_RETURN_IF_ERROR(CheckReachable("CopyTensor: the source", src, stream));
  EMBER_RETURN_IF_ERROR(CheckReachable("CopyTensor: the destination", *dst, stream));
  const size_t bytes = src.nbytes();
  if (bytes == 0) return Status::OK();
  const bool from_host = src.device().is_cpu(), to_host = dst->device().is_cpu();
  if (from_host && to_host) {
    HostCopy(src.raw_data(), dst->raw_data(), bytes);
    return Status::OK();
  }
  if (from_host) return stream->CopyToDevice(src.raw_data(), dst->raw_data(), bytes);
  if (to_host) return stream->CopyToHost(src.raw_data(), dst->raw_data(), bytes);
  return stream->CopyOnDevice(src.raw_data(), dst->raw_data(), bytes);
}

Status ZeroTensor(Tensor* tensor, CudaStream* stream) {
  if (tensor == nullptr || !tensor->defined()) {
    return Status::InvalidArgument("ZeroTensor: no tensor to fill");
  }
  EMBER_RETURN_IF_ERROR(CheckReachable("ZeroTensor: the tensor", *tensor, stream));
  if (tensor->nbytes() == 0) return Status::OK();
  if (tensor->device().is_cpu()) {
    HostZero(tensor->raw_data(), tensor->nbytes());
    return Status::OK();
  }
  return stream->SetZero(tensor->raw_data(), tensor->nbytes());
}

}  // namespace ember
