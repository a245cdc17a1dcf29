#pragma once

// Argument checks shared by the dense operators of ops/. Each returns
// InvalidArgument with a message naming the operator, the operand and both the
// expected and the actual shape, e.g.
//   "FullyConnectedForward: weight must be f32[13, 5] on cpu, got f32[5, 13] on cpu".
// For the operators' own use; other folders check their own arguments.

#include <cstdint>
#include <initializer_list>
#include <utility>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"

namespace ember::ops {

// "[2, 3]".
std::string ShapeString(const std::vector<int64_t>& shape);

// OK when `tensor` is a defined host tensor of `dtype` with exactly `shape`.
Status CheckTensor(const char* op, const char* name, const Tensor& tensor, DType dtype,
                   const std::vector<int64_t>& shape);

// OK when `tensor` is a defined host tensor of `dtype` with `rank` dimensions
// (any sizes).
Status CheckRank(const char* op, const char* name, const Tensor& tensor, DType dtype, int rank);

// CheckTensor for an output the caller allocated: also fails on a null pointer.
Status CheckOutput(const char* op, const char* name, const Tensor* tensor, DType dtype,
                   const std::vector<int64_t>& shape);

// A tensor and its name, for messages.
using NamedTensor = std::pair<const char*, const Tensor*>;

// OK unless two outputs, or an output and an input, share memory (outputs
// are written while inputs and other outputs are still being read). Compares
// address ranges only, so it serves host and device tensors alike.
Status CheckNoOverlap(const char* op, std::initializer_list<NamedTensor> outputs,
                      std::initializer_list<NamedTensor> inputs);

}  // namespace ember::ops
