#include "ops/precision.h"

namespace ember::ops {

const char* ComputePrecisionName(ComputePrecision precision) {
  switch (precision) {
    case ComputePrecision::kF32:
      return "f32";
    case ComputePrecision::kBf16:
      return "bf16";
    case ComputePrecision::kF16:
      return "f16";
  }
  return "unknown";
}

Result<ComputePrecision> ParseComputePrecision(const std::string& text) {
  for (ComputePrecision p :
       {ComputePrecision::kF32, ComputePrecision::kBf16, ComputePrecision::kF16}) {
    if (text == ComputePrecisionName(p)) return p;
  }
  return Status::InvalidArgument("'", text, "' is not a precision; use f32, bf16 or f16");
}

}  // namespace ember::ops
