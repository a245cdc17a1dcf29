#pragma once

// Portable 16-lane float vectors (GCC/Clang vector extensions) and a marker
// that compiles a hot loop once per x86 ISA level and picks the best one the
// CPU has when the program starts.
//
// The project builds for baseline x86-64 (SSE2) so that one binary runs on
// any x86-64 machine; EMBER_MULTIVERSIONED functions also get AVX2 and
// AVX-512 copies. Their results are bit-identical to the baseline copy: the
// vectors only run independent lanes side by side (no reassociation), and the
// project compiles with -ffp-contract=off so that no copy fuses a multiply
// and an add that another copy rounds twice.

#include <cstdint>
#include <cstring>

namespace ember {

using F32x16 = float __attribute__((vector_size(64)));

inline F32x16 LoadF32x16(const float* p) {
  F32x16 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline void StoreF32x16(float* p, F32x16 v) { std::memcpy(p, &v, sizeof(v)); }

// Every lane x. Not 0 + x: with strict floating point the compiler must
// compute that sum (it is not x for x = -0) before broadcasting. Integer
// lanes have no such case, so x's bits are splatted as integers and the
// vector reinterpreted (a vector cast keeps the bits): one broadcast
// instruction in every clone of EMBER_MULTIVERSIONED code. (GCC 12 builds
// the float forms, 1 * x or a braced list of 16 x's, lane by lane there.)
inline F32x16 BroadcastF32x16(float x) {
  using I32x16 = int32_t __attribute__((vector_size(64)));
  int32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return (F32x16)(I32x16{} + bits);
}

}  // namespace ember

// ThreadSanitizer builds (EMBER_SANITIZE=thread) have one version: the
// clones' ifunc resolvers run while the dynamic linker relocates, before the
// TSan runtime is up, and their instrumented code crashes there.
#if defined(__x86_64__) && (defined(__clang__) ? __clang_major__ >= 14 : defined(__GNUC__)) && \
    !defined(__SANITIZE_THREAD__)
#define EMBER_MULTIVERSIONED __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define EMBER_MULTIVERSIONED
#endif
