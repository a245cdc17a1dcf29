#pragma once

// The arithmetic precision of the dense GEMMs.

#include <string>

#include "core/status.h"

namespace ember::ops {

// With kBf16 and kF16, the fully connected layers' inputs, weights (and in the
// backward their output gradients) are rounded to the 16-bit type on the
// device and multiplied with f32 accumulation; parameters, optimizer state,
// activations and gradients stay f32 (master weights in f32). The CPU kernels
// compute in f32, and in kBf16 on a CPU with AMX or AVX512-BF16 (layers with at
// most 16 inputs or outputs keep f32 on that side; ops/dense_ops.h).
enum class ComputePrecision { kF32, kBf16, kF16 };

// "f32", "bf16" or "f16".
const char* ComputePrecisionName(ComputePrecision precision);

// Reads a name ComputePrecisionName gives; InvalidArgument naming `text`
// otherwise.
Result<ComputePrecision> ParseComputePrecision(const std::string& text);

}  // namespace ember::ops
