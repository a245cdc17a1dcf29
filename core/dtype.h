#pragma once

#include <cstddef>
#include <cstdint>

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

// Round-to-nearest-even conversions between float and the 16-bit types.
BFloat16 FloatToBFloat16(float value);
float BFloat16ToFloat(BFloat16 value);
Half FloatToHalf(float value);
float HalfToFloat(Half value);

}  // namespace ember
