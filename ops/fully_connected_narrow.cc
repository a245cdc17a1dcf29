// Fully connected kernels for layers narrow on one side; see
// ops/internal/fully_connected_narrow.h. Each loop keeps several independent
// 16-lane sums in flight (a sum is a chain of dependent adds) and handles the
// columns past the last whole vector one at a time, in the same order.

#include "ops/internal/fully_connected_narrow.h"

#include <algorithm>
#include <cstdint>

#include "core/simd.h"

namespace ember::ops::internal {
namespace {

constexpr int64_t kLanes = 16;
// Vectors summed side by side.
constexpr int64_t kChains = 8;

// max(v, 0) as std::max(v, 0.0f) computes it: NaN stays NaN.
inline F32x16 Relu(F32x16 v) {
  const F32x16 zero{};
  return v < zero ? zero : v;
}

}  // namespace

int64_t NarrowRowBlock(int64_t in, int64_t out) {
  return std::max<int64_t>(64, (int64_t{1} << 15) / std::max<int64_t>(in * out, 1));
}

EMBER_MULTIVERSIONED
void NarrowInputForwardRows(const float* x, const float* wt, const float* bias, bool relu,
                            int64_t begin, int64_t end, int64_t in, int64_t out, float* y) {
  const int64_t whole = out / kLanes * kLanes;
  for (int64_t r = begin; r < end; ++r) {
    const float* xr = x + r * in;
    float* yr = y + r * out;
    int64_t o = 0;
    for (; o + kChains * kLanes <= whole; o += kChains * kLanes) {
      F32x16 acc[kChains] = {};
      for (int64_t k = 0; k < in; ++k) {
        const F32x16 xk = BroadcastF32x16(xr[k]);
#pragma GCC unroll 8
        for (int64_t c = 0; c < kChains; ++c) {
          acc[c] += xk * LoadF32x16(wt + k * out + o + c * kLanes);
        }
      }
#pragma GCC unroll 8
      for (int64_t c = 0; c < kChains; ++c) {
        const F32x16 v = acc[c] + LoadF32x16(bias + o + c * kLanes);
        StoreF32x16(yr + o + c * kLanes, relu ? Relu(v) : v);
      }
    }
    for (; o < whole; o += kLanes) {
      F32x16 acc{};
      for (int64_t k = 0; k < in; ++k) acc += BroadcastF32x16(xr[k]) * LoadF32x16(wt + k * out + o);
      const F32x16 v = acc + LoadF32x16(bias + o);
      StoreF32x16(yr + o, relu ? Relu(v) : v);
    }
    for (; o < out; ++o) {
      float acc = 0.0f;
      for (int64_t k = 0; k < in; ++k) acc += xr[k] * wt[k * out + o];
      const float v = acc + bias[o];
      yr[o] = relu ? std::max(v, 0.0f) : v;
    }
  }
}

EMBER_MULTIVERSIONED
void NarrowOutputGradients(const float* g, const float* x, const float* w, int64_t begin,
                           int64_t end, int64_t in, int64_t out, float* partial, float* dx) {
  const int64_t whole = in / kLanes * kLanes;
  for (int64_t o = 0; o < out; ++o) {
    float* po = partial + o * in;
    int64_t k = 0;
    for (; k + kChains * kLanes <= whole; k += kChains * kLanes) {
      F32x16 acc[kChains] = {};
      for (int64_t r = begin; r < end; ++r) {
        const F32x16 gr = BroadcastF32x16(g[r * out + o]);
        const float* xr = x + r * in + k;
#pragma GCC unroll 8
        for (int64_t c = 0; c < kChains; ++c) acc[c] += gr * LoadF32x16(xr + c * kLanes);
      }
#pragma GCC unroll 8
      for (int64_t c = 0; c < kChains; ++c) StoreF32x16(po + k + c * kLanes, acc[c]);
    }
    for (; k < whole; k += kLanes) {
      F32x16 acc{};
      for (int64_t r = begin; r < end; ++r) {
        acc += BroadcastF32x16(g[r * out + o]) * LoadF32x16(x + r * in + k);
      }
      StoreF32x16(po + k, acc);
    }
    for (; k < in; ++k) {
      float acc = 0.0f;
      for (int64_t r = begin; r < end; ++r) acc += g[r * out + o] * x[r * in + k];
      po[k] = acc;
    }
  }
  if (dx == nullptr) return;
  for (int64_t r = begin; r < end; ++r) {
    const float* gr = g + r * out;
    float* dxr = dx + r * in;
    int64_t k = 0;
    for (; k + kChains * kLanes <= whole; k += kChains * kLanes) {
      F32x16 acc[kChains] = {};
      for (int64_t o = 0; o < out; ++o) {
        const F32x16 go = BroadcastF32x16(gr[o]);
#pragma GCC unroll 8
        for (int64_t c = 0; c < kChains; ++c) {
          acc[c] += go * LoadF32x16(w + o * in + k + c * kLanes);
        }
      }
#pragma GCC unroll 8
      for (int64_t c = 0; c < kChains; ++c) StoreF32x16(dxr + k + c * kLanes, acc[c]);
    }
    for (; k < whole; k += kLanes) {
      F32x16 acc{};
      for (int64_t o = 0; o < out; ++o) acc += BroadcastF32x16(gr[o]) * LoadF32x16(w + o * in + k);
      StoreF32x16(dxr + k, acc);
    }
    for (; k < in; ++k) {
      float acc = 0.0f;
      for (int64_t o = 0; o < out; ++o) acc += gr[o] * w[o * in + k];
      dxr[k] = acc;
    }
  }
}

}  // namespace ember::ops::internal
