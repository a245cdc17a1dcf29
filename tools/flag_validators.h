#pragma once

// The range checks of the tools' numeric flags, for gflags' DEFINE_validator
// (`DEFINE_validator(batch_size, &ember::tools::IsPositive32)`): gflags calls
// one with the flag's name and value whenever the value is set, and refuses a
// value it returns false for, naming the flag, so that a bad value is an
// error before any work starts.

#include <cstdint>

namespace ember::tools {

inline bool IsPositive32(const char*, int32_t value) { return value > 0; }
inline bool IsNonNegative32(const char*, int32_t value) { return value >= 0; }
inline bool IsPositive64(const char*, int64_t value) { return value > 0; }
inline bool IsNonNegative64(const char*, int64_t value) { return value >= 0; }
// -1 means "choose automatically".
inline bool IsAutoOrNonNegative64(const char*, int64_t value) { return value >= -1; }
inline bool IsPositiveDouble(const char*, double value) { return value > 0; }
inline bool IsNonNegativeDouble(const char*, double value) { return value >= 0; }
// In (0, 1).
inline bool IsFraction(const char*, double value) { return value > 0 && value < 1; }
// In [0, 1].
inline bool IsRatio(const char*, double value) { return value >= 0 && value <= 1; }

}  // namespace ember::tools
