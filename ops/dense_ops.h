#pragma once

// Dense operators on the CPU, each with forward and backward. All tensors are
// host f32, row-major, allocated by the caller with the shapes given; outputs
// are overwritten unless a comment says "accumulates". Parallel work runs on
// the calling thread's oneTBB arena and, for oneDNN primitives, on the calling
// thread's OpenMP thread count (core/threads.h: SetOpenMpThreads).
// Every function returns InvalidArgument, naming the operand, on a shape or
// dtype mismatch, and never crashes on one.

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/precision.h"

namespace ember::ops {

enum class Activation { kNone, kRelu };

// y[B, out] = act(x[B, in] * weight[out, in]^T + bias[out]): one oneDNN
// matmul that adds the bias and applies the activation in its epilogue; for
// in <= 16, one pass that does all of it. Safe to call concurrently from
// several threads.
// Returns Internal if oneDNN fails.
// With ComputePrecision::kBf16, x and weight are rounded to bf16 for the
// product (f32 sums, f32 y; ops/internal/matmul.h), as on a CUDA device;
// a layer with at most 16 inputs computes in f32 either way (its one pass is
// bound by memory, not arithmetic). Returns FailedPrecondition for kBf16 on a
// CPU without AVX512-BF16 or AMX, and InvalidArgument for kF16.
// `copies` (kBf16 only; ignored for kF32): bf16 roundings of x, weight and y
// that the caller keeps between the forward and the backward of a layer, and
// between one layer's output and the next layer's input, so that each is
// rounded once a step (see KernelContext::input_bf16). Each non-null pointer
// is either undefined, and the kernel fills it (y: after the bias and the
// activation, in the same pass), or holds the rounding already, [rows, cols]
// bf16, and the kernel uses it; InvalidArgument when a held one has another
// shape or dtype.
struct Bf16Copies {
  Tensor* x = nullptr;
  Tensor* weight = nullptr;
  Tensor* y = nullptr;  // Forward only.
};

Status FullyConnectedForward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                             Activation activation, Tensor* y,
                             ComputePrecision precision = ComputePrecision::kF32,
                             const Bf16Copies& copies = {});

// Gradients of FullyConnectedForward. `y` is the forward output (used for the
// ReLU mask: dy * (y > 0)). `dx` may be null when the input needs no gradient
// (first layer). dweight[out, in] and dbias[out] are overwritten (zeros when
// B = 0). One pass over dy applies the mask and sums dbias (the same sums for
// any thread count), then one oneDNN SGEMM for each of dweight and dx; for
// out <= 16 the pass computes dweight and dx itself. Safe to call
// concurrently from several threads; a ReLU layer without `overwrite_dy`
// takes scratch of B * out floats from the caching host allocator (returns
// ResourceExhausted if that fails).
// With kBf16, the products round x, weight and the gradient through the
// activation to bf16 (f32 sums; dbias is summed in f32); a layer with at most
// 16 outputs computes in f32 either way. Errors for precision as the forward.
// `copies` as the forward's (x and weight; y is not read). With
// `overwrite_dy`, dy's values are the caller's to lose: a ReLU layer writes
// dy * (y > 0) over dy instead of into scratch (the same results).
// dweight and dbias may both be null (the input gradient alone; the
// zero-bubble schedules' B) and dx null (the parameter gradients alone, their
// W): run so in two calls on the same dy, even overwritten by the first (the
// mask is idempotent), the gradients have the bits of one call's.
Status FullyConnectedBackward(const Tensor& x, const Tensor& weight, const Tensor& y,
                              const Tensor& dy, Activation activation, Tensor* dx, Tensor* dweight,
                              Tensor* dbias, ComputePrecision precision = ComputePrecision::kF32,
                              const Bf16Copies& copies = {}, bool overwrite_dy = false);

// DLRM dot interaction: for features[B, F, D], out[B, F*(F-1)/2] holds the dot
// products of every pair (i, j) with i > j, in the order (1,0), (2,0), (2,1),
// (3,0), ... (the strictly lower triangle, row by row).
Status DotInteractionForward(const Tensor& features, Tensor* out);
// dfeatures[B, F, D] from dout[B, F*(F-1)/2].
Status DotInteractionBackward(const Tensor& features, const Tensor& dout, Tensor* dfeatures);

// DLRM's interaction layer without the concatenations around the dot
// interaction: for direct[B, D] (the bottom MLP's output) and pooled[B, S*D]
// (S pooled embeddings), out[B, D + F*(F-1)/2] with F = S + 1 is direct
// followed by DotInteractionForward of the F vectors [direct, pooled_1, ...,
// pooled_S]; the same values as ConcatColumns({direct, dots}) of
// DotInteractionForward(ConcatColumns({direct, pooled})).
Status DlrmInteractionForward(const Tensor& direct, const Tensor& pooled, Tensor* out);
// ddirect[B, D] and dpooled[B, S*D] from dout[B, D + F*(F-1)/2]; ddirect
// includes the passed-through columns' gradient.
Status DlrmInteractionBackward(const Tensor& direct, const Tensor& pooled, const Tensor& dout,
                               Tensor* ddirect, Tensor* dpooled);

// out[B, sum(widths)] = the columns of each input[B, width_k] side by side.
Status ConcatColumns(const std::vector<Tensor>& inputs, Tensor* out);
// The inverse: splits din[B, sum(widths)] into outputs[k][B, width_k]. The
// caller allocates the outputs; their widths say where din is cut.
Status SplitColumns(const Tensor& din, std::vector<Tensor>* outputs);

enum class Pooling { kSum, kMean };

// Embedding-bag pooling. `rows`[U, D] holds one row per unique key; bag b is
// made of the rows row_index[offsets[b] .. offsets[b+1]); out[num_bags, D] is
// their sum (or mean; an empty bag pools to zeros). offsets is i64
// [num_bags + 1], non-decreasing from offsets[0] = 0 to offsets[num_bags] =
// nnz; row_index i64 [nnz] with values in [0, U). A value out of range or a
// malformed offsets is InvalidArgument naming the position.
Status EmbeddingBagForward(const Tensor& rows, const Tensor& row_index, const Tensor& offsets,
                           Pooling pooling, Tensor* out);
// drows[U, D] = gradient w.r.t. `rows` (summed over every bag a row is in),
// computed in a fixed order so the result is identical for any thread count.
// U is taken from drows.
//
// Order: with `ranges` > 1, the bags form that many consecutive ranges of
// examples of `bags_per_example` bags each (example ranges [E*k/ranges,
// E*(k+1)/ranges) of the E examples, as GraphExecutor splits rows); each
// row's gradient is summed in bag order within each range, then over the
// ranges in order: the bits of `ranges` ranks each holding one range whose
// sums are added in rank order (pipeline/training_step.h). Otherwise in bag
// order over all bags. InvalidArgument when the bags are not a multiple of
// bags_per_example.
Status EmbeddingBagBackward(const Tensor& dout, const Tensor& row_index, const Tensor& offsets,
                            Pooling pooling, Tensor* drows, int ranges = 1,
                            int64_t bags_per_example = 1);

// Mean over the batch of the numerically stable sigmoid cross-entropy
// max(z, 0) - z * y + log(1 + exp(-|z|)) for logits z[B] and labels y[B] in
// [0, 1]. When `dlogits` is not null it receives d(mean loss)/dz = (sigmoid(z)
// - y) / B. logits may also be [B, 1]; labels and dlogits have the shape of
// logits. The sum runs in double, in order. Fails with InvalidArgument naming
// the index on a label outside [0, 1] (or NaN), and on an empty batch.
//
// `mean_over` > 0 divides by it instead of B (loss and dlogits): a rank's
// share of the mean over the batches of several ranks, mean_over being their
// total, so that the ranks' dlogits are the bits one rank computes for the
// whole batch.
Result<double> SigmoidCrossEntropyWithLogits(const Tensor& logits, const Tensor& labels,
                                             Tensor* dlogits, int64_t mean_over = 0);

// out = 1 / (1 + exp(-x)), elementwise.
Status Sigmoid(const Tensor& x, Tensor* out);

}  // namespace ember::ops
