#include "core/tensor_copy.h"

#include <cstring>
#include <string>

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
    std::memcpy(dst->raw_data(), src.raw_data(), bytes);
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
    std::memset(tensor->raw_data(), 0, tensor->nbytes());
    return Status::OK();
  }
  return stream->SetZero(tensor->raw_data(), tensor->nbytes());
}

}  // namespace ember
