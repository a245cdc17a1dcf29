#pragma once

// The cross layer of DCN-v2 (Wang et al. 2021, eq. 1), full rank and low rank
// (the "mixture of low-rank experts" with one expert, eq. 2), with forward,
// backward and cost model. Same conventions as ops/dense_ops.h: host f32
// row-major tensors allocated by the caller, outputs overwritten,
// InvalidArgument naming the operand on a shape or dtype mismatch.
// Per-sample work runs in parallel over the batch and weight gradients in
// parallel over the weight's rows, on the calling thread's oneTBB arena; the
// results do not depend on the number of threads.
// REQUIRES: no output overlaps an input or another output (two outputs that
// are the same tensor are InvalidArgument).

#include <cstdint>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/op_cost.h"

namespace ember::ops {

// Saved intermediates. The forwards compute z = xl W^T + bias [B, d] (and,
// low rank, t = xl V [B, r]) on the way to out; given the optional saved_*
// outputs they also keep them there, and the backwards given the same
// tensors read them instead of recomputing them (one GEMM per full-rank layer,
// two thin ones per low-rank layer) and give the same gradients bit for bit.
// The saved tensors must be those of the forward of the same x0, xl and
// weights; they are checked for shape, not for content.

// out[B, d] = x0 ⊙ (xl W^T + bias) + xl, i.e. per sample
// x_{l+1} = x0 ⊙ (W x_l + b) + x_l, for x0, xl [B, d], weight W [d, d],
// bias [d]. A non-null saved_z [B, d] receives z = xl W^T + bias.
Status CrossLayerForward(const Tensor& x0, const Tensor& xl, const Tensor& weight,
                         const Tensor& bias, Tensor* out, Tensor* saved_z = nullptr);

// Gradients of CrossLayerForward from dout[B, d], all overwritten:
// dx0[B, d] = dout ⊙ (W x_l + b), dxl[B, d] = W^T (dout ⊙ x0) + dout,
// dweight[d, d] = sum_b (dout ⊙ x0)_b x_l,b^T, dbias[d] = sum_b (dout ⊙ x0)_b
// (zeros when B = 0). When x_l is x0 (the first layer) the caller adds dx0
// and dxl. With saved_z (the forward's) z is read, not recomputed.
Status CrossLayerBackward(const Tensor& x0, const Tensor& xl, const Tensor& weight,
                          const Tensor& bias, const Tensor& dout, Tensor* dx0, Tensor* dxl,
                          Tensor* dweight, Tensor* dbias, const Tensor* saved_z = nullptr);

// Low rank: W = U V^T with u, v [d, r], so per sample
// x_{l+1} = x0 ⊙ (U (V^T x_l) + b) + x_l, in O(d * r) instead of O(d^2).
// saved_t [B, r] and saved_z [B, d] come together (both null or neither,
// else InvalidArgument) and receive t = xl V and z = t U^T + bias.
Status LowRankCrossLayerForward(const Tensor& x0, const Tensor& xl, const Tensor& u,
                                const Tensor& v, const Tensor& bias, Tensor* out,
                                Tensor* saved_t = nullptr, Tensor* saved_z = nullptr);

// Gradients of LowRankCrossLayerForward, all overwritten. With t = V^T x_l
// and g = dout ⊙ x0 per sample: dx0 = dout ⊙ (U t + b),
// dxl = V (U^T g) + dout, du[d, r] = sum_b g_b t_b^T,
// dv[d, r] = sum_b x_l,b (U^T g_b)^T, dbias = sum_b g_b. With saved_t and
// saved_z (the forward's; both or neither) t and z are read, not recomputed.
Status LowRankCrossLayerBackward(const Tensor& x0, const Tensor& xl, const Tensor& u,
                                 const Tensor& v, const Tensor& bias, const Tensor& dout,
                                 Tensor* dx0, Tensor* dxl, Tensor* du, Tensor* dv, Tensor* dbias,
                                 const Tensor* saved_t = nullptr, const Tensor* saved_z = nullptr);

// Costs of the operators as a graph runs them: the forward keeps z (and t)
// and the backward reads them. REQUIRES: batch, dim >= 0 (and rank >= 0).

// Forward, per sample: the matrix-vector product (2d^2), the bias, the
// product with x0 and the residual add (3d); reads x0, xl, W and b, writes
// out and z:
//   flops = B * (2d^2 + 3d),  bytes = 4 * (4Bd + d^2 + d).
OpCost CrossLayerForwardCost(int64_t batch, int64_t dim);

// Backward from the saved z, per sample: dx0 (d), g (d), W^T g + dout
// (2d^2 + d), the dweight update (2d^2) and the dbias update (d); reads x0,
// xl, z, dout and W, writes dx0, dxl, dweight and dbias:
//   flops = B * (4d^2 + 4d),  bytes = 4 * (6Bd + 2d^2 + d).
// (Recomputing z instead adds B * (2d^2 + d) flops.)
OpCost CrossLayerBackwardCost(int64_t batch, int64_t dim);

// Low-rank forward, per sample: V^T x_l and U t (2dr each) and 3d as above;
// reads x0, xl, U, V and b, writes out, t and z:
//   flops = B * (4dr + 3d),  bytes = 4 * (4Bd + Br + 2dr + d).
OpCost LowRankCrossLayerForwardCost(int64_t batch, int64_t dim, int64_t rank);

// Low-rank backward from the saved t and z, per sample: dx0 and g (2d),
// U^T g (2dr), V (U^T g) + dout (2dr + d), du and dv (2dr each) and dbias
// (d); reads x0, xl, z, t, dout, U and V, writes dx0, dxl, du, dv and dbias:
//   flops = B * (8dr + 4d),  bytes = 4 * (6Bd + Br + 4dr + d).
// (Recomputing t and z instead adds B * (4dr + d) flops.)
OpCost LowRankCrossLayerBackwardCost(int64_t batch, int64_t dim, int64_t rank);

}  // namespace ember::ops
