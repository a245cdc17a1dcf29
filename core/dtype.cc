#include "core/dtype.h"

#include <cmath>
#include <cstring>

#include "core/simd.h"

namespace ember {

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
  }
  return "unknown";
}

EMBER_MULTIVERSIONED
void FloatsToBFloat16(const float* in, int64_t n, BFloat16* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = FloatToBFloat16(in[i]);
}

float BFloat16ToFloat(BFloat16 value) {
  const uint32_t bits = static_cast<uint32_t>(value.bits) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

Half FloatToHalf(float value) {
  uint32_t f;
  std::memcpy(&f, &value, sizeof(f));
  const uint32_t sign = (f >> 16) & 0x8000;
  f &= 0x7fffffff;
  if (f >= 0x7f800000) {  // Inf or NaN.
    return Half{static_cast<uint16_t>(sign | 0x7c00 | (f > 0x7f800000 ? 0x200 : 0))};
  }
  if (f >= 0x477ff000) return Half{static_cast<uint16_t>(sign | 0x7c00)};  // Overflow.
  if (f < 0x38800000) {  // Subnormal half or zero.
    const uint32_t exponent = f >> 23;
    if (exponent < 102) return Half{static_cast<uint16_t>(sign)};
    const uint32_t mantissa = (f & 0x7fffff) | 0x800000;
    const uint32_t shift = 126 - exponent;
    uint32_t half = mantissa >> shift;
    const uint32_t remainder = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (half & 1))) ++half;
    return Half{static_cast<uint16_t>(sign | half)};
  }
  uint32_t half = ((f >> 13) - (112u << 10));
  const uint32_t remainder = f & 0x1fff;
  if (remainder > 0x1000 || (remainder == 0x1000 && (half & 1))) ++half;
  return Half{static_cast<uint16_t>(sign | half)};
}

float HalfToFloat(Half value) {
  const uint32_t sign = static_cast<uint32_t>(value.bits & 0x8000) << 16;
  const uint32_t exponent = (value.bits >> 10) & 0x1f;
  uint32_t mantissa = value.bits & 0x3ff;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // Normalise a subnormal.
      int e = -1;
      do {
        ++e;
        mantissa <<= 1;
      } while ((mantissa & 0x400) == 0);
      bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mantissa & 0x3ff) << 13);
    }
  } else if (exponent == 31) {
    bits = sign | 0x7f800000 | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

}  // namespace ember
