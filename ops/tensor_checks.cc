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

}  // namespace ember::ops
