#include "core/tensor.h"

#include <cstring>
#include <sstream>

namespace ember {
namespace {

int64_t ShapeNumel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

int64_t Tensor::numel() const { return ShapeNumel(shape_); }

Result<Tensor> Tensor::Allocate(std::vector<int64_t> shape, DType dtype, Device device,
                                Allocator* allocator) {
  for (int64_t d : shape) {
    if (d < 0) return Status::InvalidArgument("negative tensor dimension ", d);
  }
  if (allocator == nullptr) {
    EMBER_ASSIGN_OR_RETURN(allocator, AllocatorFor(device));
  }
  const size_t bytes = static_cast<size_t>(ShapeNumel(shape)) * DTypeSize(dtype);
  EMBER_ASSIGN_OR_RETURN(void* data, allocator->Allocate(bytes));
  Tensor tensor;
  tensor.storage_ = std::make_shared<Storage>(allocator, data, bytes);
  tensor.shape_ = std::move(shape);
  tensor.dtype_ = dtype;
  return tensor;
}

Tensor Tensor::Empty(std::vector<int64_t> shape, DType dtype) {
  Result<Tensor> tensor = Allocate(std::move(shape), dtype, Device::Cpu(), CpuAllocator());
  CHECK(tensor.ok()) << tensor.status();
  return std::move(tensor).value();
}

Tensor Tensor::Zeros(std::vector<int64_t> shape, DType dtype) {
  Tensor tensor = Empty(std::move(shape), dtype);
  tensor.SetZero();
  return tensor;
}

Tensor Tensor::FromVector(const std::vector<float>& values, std::vector<int64_t> shape) {
  Tensor tensor = Empty(std::move(shape), DType::kF32);
  CHECK_EQ(tensor.numel(), static_cast<int64_t>(values.size()))
      << "FromVector: shape does not match the value count";
  std::memcpy(tensor.raw_data(), values.data(), values.size() * sizeof(float));
  return tensor;
}

Tensor Tensor::Reshape(std::vector<int64_t> shape) const {
  CHECK_EQ(ShapeNumel(shape), numel()) << "Reshape must keep the element count";
  Tensor view = *this;
  view.shape_ = std::move(shape);
  return view;
}

Tensor Tensor::Slice(int64_t begin, int64_t end) const {
  CHECK_GE(ndim(), 1) << "Slice needs at least one dimension";
  CHECK(0 <= begin && begin <= end && end <= shape_[0]) << "Slice [" << begin << ", " << end
                                                       << ") outside " << shape_[0] << " rows";
  const int64_t row_elements = shape_[0] == 0 ? 0 : numel() / shape_[0];
  Tensor view = *this;
  view.offset_bytes_ += static_cast<size_t>(begin * row_elements) * DTypeSize(dtype_);
  view.shape_[0] = end - begin;
  return view;
}

Tensor Tensor::Clone() const {
  CHECK(device().is_cpu()) << "Clone is for host tensors";
  Tensor copy = Empty(shape_, dtype_);
  if (nbytes() > 0) std::memcpy(copy.raw_data(), raw_data(), nbytes());
  return copy;
}

void Tensor::SetZero() {
  CHECK(device().is_cpu()) << "SetZero is for host tensors";
  if (nbytes() > 0) std::memset(raw_data(), 0, nbytes());
}

std::string Tensor::DebugString() const {
  std::ostringstream out;
  out << DTypeName(dtype_) << "[";
  for (size_t i = 0; i < shape_.size(); ++i) out << (i ? ", " : "") << shape_[i];
  out << "] on " << device().ToString();
  return out.str();
}

}  // namespace ember
