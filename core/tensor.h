#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include <glog/logging.h>

#include "core/allocator.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/status.h"

namespace ember {

// A block of memory on one device, freed by its allocator when the last
// tensor viewing it goes away.
class Storage {
 public:
  Storage(Allocator* allocator, void* data, size_t bytes)
      : allocator_(allocator), data_(data), bytes_(bytes) {}
  ~Storage() { allocator_->Deallocate(data_); }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return allocator_->device(); }

 private:
  Allocator* allocator_;
  void* data_;
  size_t bytes_;
};

// A dense, row-major (contiguous) n-dimensional array on one device. Copying a
// Tensor shares its storage; Clone() copies the data.
// Thread safety: distinct Tensors may be used concurrently; writes to shared
// storage need outside synchronisation.
class Tensor {
 public:
  Tensor() = default;

  // Uninitialised host tensor. CHECK-fails only if the host is out of memory.
  static Tensor Empty(std::vector<int64_t> shape, DType dtype = DType::kF32);
  // Zero-filled host tensor.
  static Tensor Zeros(std::vector<int64_t> shape, DType dtype = DType::kF32);
  // Uninitialised tensor on any device; fails if the device is absent or full.
  static Result<Tensor> Allocate(std::vector<int64_t> shape, DType dtype, Device device,
                                 Allocator* allocator = nullptr);
  // Host tensor holding a copy of `values`.
  static Tensor FromVector(const std::vector<float>& values, std::vector<int64_t> shape);

  bool defined() const { return storage_ != nullptr; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const {
    DCHECK_LT(i, ndim());
    return shape_[i];
  }
  int64_t numel() const;
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::Cpu(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype_); }

  void* raw_data() const {
    return storage_ ? static_cast<char*>(storage_->data()) + offset_bytes_ : nullptr;
  }
  template <typename T>
  T* data() const {
    CHECK(dtype_ == DTypeOf<T>::value)
        << "Tensor::data<T>() with T of " << DTypeName(DTypeOf<T>::value)
        << " on a " << DTypeName(dtype_) << " tensor";
    return static_cast<T*>(raw_data());
  }

  // A view with the same storage and another shape of equal element count.
  Tensor Reshape(std::vector<int64_t> shape) const;
  // A view of rows [begin, end) along the first dimension.
  Tensor Slice(int64_t begin, int64_t end) const;
  // A deep copy on the host. REQUIRES: a host tensor.
  Tensor Clone() const;
  // Sets every byte to zero. REQUIRES: a host tensor.
  void SetZero();

  // "f32[2, 3] on cpu".
  std::string DebugString() const;

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_bytes_ = 0;
  std::vector<int64_t> shape_;
  DType dtype_ = DType::kF32;
};

}  // namespace ember
