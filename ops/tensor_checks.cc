#include "ops/internal/tensor_checks.h"

#include <sstream>

namespace ember::ops {
namespace {

std::string Describe(DType dtype, const std::vector<int64_t>& shape) {
  return std::string(DTypeName(dtype)) + ShapeString(shape) + " on cpu";
}

std::string Describe(const Tensor& tensor) {
  return tensor.defined() ? tensor.DebugString() : std::string("an undefined tensor");
}

bool IsUsable(const Tensor& tensor, DType dtype) {
  return tensor.defined() && tensor.dtype() == dtype && tensor.device().is_cpu();
}

}  // namespace

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

Status CheckTensor(const char* op, const char* name, const Tensor& tensor, DType dtype,
                   const std::vector<int64_t>& shape) {
  if (IsUsable(tensor, dtype) && tensor.shape() == shape) return Status::OK();
  return Status::InvalidArgument(op, ": ", name, " must be ", Describe(dtype, shape), ", got ",
                                 Describe(tensor));
}

Status CheckRank(const char* op, const char* name, const Tensor& tensor, DType dtype, int rank) {
  if (IsUsable(tensor, dtype) && tensor.ndim() == rank) return Status::OK();
  return Status::InvalidArgument(op, ": ", name, " must be a ", rank, "-d ", DTypeName(dtype),
                                 " tensor on cpu, got ", Describe(tensor));
}

Status CheckOutput(const char* op, const char* name, const Tensor* tensor, DType dtype,
                   const std::vector<int64_t>& shape) {
  if (tensor == nullptr) {
    return Status::InvalidArgument(op, ": ", name, " is null; expected ", Describe(dtype, shape));
  }
  return CheckTensor(op, name, *tensor, dtype, shape);
}

namespace {

bool Overlaps(const Tensor& a, const Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0) return false;
  const char* pa = static_cast<const char*>(a.raw_data());
  const char* pb = static_cast<const char*>(b.raw_data());
  return pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

}  // namespace

Status CheckNoOverlap(const char* op, std::initializer_list<NamedTensor> outputs,
                      std::initializer_list<NamedTensor> inputs) {
  for (auto out = outputs.begin(); out != outputs.end(); ++out) {
    for (auto other = out + 1; other != outputs.end(); ++other) {
      if (Overlaps(*out->second, *other->second)) {
        return Status::InvalidArgument(op, ": outputs ", out->first, " and ", other->first,
                                       " share memory");
      }
    }
    for (const NamedTensor& in : inputs) {
      if (Overlaps(*out->second, *in.second)) {
        return Status::InvalidArgument(op, ": output ", out->first, " shares memory with input ",
                                       in.first);
      }
    }
  }
  return Status::OK();
}

}  // namespace ember::ops
