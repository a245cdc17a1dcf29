#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ember {

enum class DType { kF32, kF16, kBF16, kI32, kI64 };

// Bytes per element.
constexpr size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
  }
  return 0;
}

const char* DTypeName(DType dtype);

// Maps a C++ element type to its DType; used by Tensor::data<T>().
template <typename T>
struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::kF32; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kI32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::kI64; };
// Half types are stored as raw 16-bit words on the host.
struct Half { uint16_t bits; };
struct BFloat16 { uint16_t bits; };
template <> struct DTypeOf<Half> { static constexpr DType value = DType::kF16; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = DType::kBF16; };

// Round-to-nearest-even conversions between float and the 16-bit types. A
// NaN stays a (quiet) NaN.
inline BFloat16 FloatToBFloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return BFloat16{static_cast<uint16_t>((bits >> 16) | 0x40)};
  // Round to nearest even on the 16 dropped bits.
  const uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return BFloat16{static_cast<uint16_t>((bits + rounding) >> 16)};
}
float BFloat16ToFloat(BFloat16 value);
// out[i] = FloatToBFloat16(in[i]) for i in [0, n), vectorised.
void FloatsToBFloat16(const float* in, int64_t n, BFloat16* out);
Half FloatToHalf(float value);
float HalfToFloat(Half value);

}  // namespace ember
