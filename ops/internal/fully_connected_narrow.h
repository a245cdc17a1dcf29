#pragma once

// Kernels for fully connected layers that are narrow on one side: at most
// kNarrowWidth inputs (DLRM's first bottom layer reads 13 dense features) or
// at most kNarrowWidth outputs (every CTR model's logit layer has one). For
// them a GEMM does a few multiply-adds per element it reads or writes, so a
// oneDNN call is bound by memory traffic, by its own parallel split (it runs
// batch x 256 x 1 on one thread) and by the separate elementwise passes over
// its output. These kernels do the products inside those passes instead,
// block of rows by block of rows, while the block is in cache:
// * narrow input, forward: y with its bias and activation in one pass;
// * narrow output, backward: dweight and dx inside the pass that masks dy.
// The narrow-input backward stays with oneDNN: its weight gradient is a
// reduction over the batch, for which oneDNN's fused multiply-adds beat
// these kernels' separate multiplies and adds (the project compiles with
// -ffp-contract=off), 0.66 against 0.83 ms per DLRM step.
//
// Determinism: every sum runs in a fixed order that does not depend on the
// thread count: over k in order for y, over the rows of a block in order and
// then block by block in order for the weight gradient, over the outputs in
// order for dx. Blocks have a fixed number of rows for a given shape.
//
// For ops/fully_connected.cc; the shapes are checked there.

#include <cstdint>

namespace ember::ops::internal {

constexpr int64_t kNarrowWidth = 16;

inline bool IsNarrowInput(int64_t in) { return in <= kNarrowWidth; }
inline bool IsNarrowOutput(int64_t out) { return out <= kNarrowWidth; }

// Rows per block of the backward of a layer narrow on the output side: about
// 32K multiply-adds of the weight gradient per block, at least 64 rows.
int64_t NarrowRowBlock(int64_t in, int64_t out);

// y[r, o] = act(sum over k in order of x[r, k] * wt[k, o], plus bias[o]) for
// rows [begin, end); wt[in, out] is the weight transposed.
void NarrowInputForwardRows(const float* x, const float* wt, const float* bias, bool relu,
                            int64_t begin, int64_t end, int64_t in, int64_t out, float* y);

// partial[o, k] = sum over rows r of [begin, end), in order, of g[r, o] * x[r, k]
// (output-major, as dweight); and when dx is not null, dx[r, k] = sum over o
// in order of g[r, o] * w[o, k] for the same rows.
void NarrowOutputGradients(const float* g, const float* x, const float* w, int64_t begin,
                           int64_t end, int64_t in, int64_t out, float* partial, float* dx);

}  // namespace ember::ops::internal
