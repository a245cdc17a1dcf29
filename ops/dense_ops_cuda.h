#pragma once

// Dense operators on CUDA devices, each with forward and backward. Tensors
// live on the stream's device, f32 row-major unless a comment says otherwise;
// shapes and semantics are those of the CPU operators (ops/dense_ops.h,
// fm_interaction.h, cross_layer.h, moe_routing.h, dropout.h,
// dense_optimizer.h, gradient_clipping.h), which are the reference the GPU
// tests compare against. Work is queued on `stream` and the functions return
// without waiting for it, unless a comment says that the function
// synchronises (those return a value computed on the device); call
// stream.Synchronize() before reading results on the host. Temporary device
// memory is stream-ordered (cudaMallocAsync). Every function returns
// InvalidArgument, naming the operand, on a dtype, shape or device mismatch,
// Internal on a failed launch or cuBLAS call; values (indices, labels) that the
// CPU operators check cannot be checked without a synchronisation, so where
// not stated otherwise they are not checked: an out-of-range index is skipped
// rather than read. Reductions run in a fixed order, so results are the same
// bits from run to run. In a build without CUDA every function returns
// FailedPrecondition.

#include <cstdint>
#include <vector>

#include "core/cuda_stream.h"
#include "core/status.h"
#include "core/tensor.h"
#include "ops/dense_ops.h"
#include "ops/dense_optimizer.h"
#include "ops/dropout.h"
#include "ops/moe_routing.h"
#include "ops/precision.h"

namespace ember::ops {

// --- Fully connected (cuBLASLt, bias and ReLU fused in the GEMM's epilogue
// where cuBLASLt offers it, else a separate kernel) --------------------------

// y[B, out] = act(x[B, in] * weight[out, in]^T + bias[out]).
Status FullyConnectedForwardCuda(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                 Activation activation, Tensor* y, CudaStream& stream,
                                 ComputePrecision precision = ComputePrecision::kF32);

// Gradients of FullyConnectedForwardCuda, as FullyConnectedBackward: `y` is
// the forward output (ReLU mask dy * (y > 0)), `dx` may be null, dweight and
// dbias are overwritten (zeros when B = 0). dbias is summed in f32 from the
// f32 (masked) dy whatever the precision.
Status FullyConnectedBackwardCuda(const Tensor& x, const Tensor& weight, const Tensor& y,
                                  const Tensor& dy, Activation activation, Tensor* dx,
                                  Tensor* dweight, Tensor* dbias, CudaStream& stream,
                                  ComputePrecision precision = ComputePrecision::kF32);

// --- Elementwise ------------------------------------------------------------

// y = max(x, 0), any shape; y may be x.
Status ReluForwardCuda(const Tensor& x, Tensor* y, CudaStream& stream);
// dx = dy * (y > 0) from the forward output y; dx may be dy.
Status ReluBackwardCuda(const Tensor& y, const Tensor& dy, Tensor* dx, CudaStream& stream);
// out = 1 / (1 + exp(-x)), computed without overflow as Sigmoid does.
Status SigmoidCuda(const Tensor& x, Tensor* out, CudaStream& stream);
// dx = dout * out * (1 - out) from the forward output `out`.
Status SigmoidBackwardCuda(const Tensor& out, const Tensor& dout, Tensor* dx, CudaStream& stream);
// out = a + b, all of one shape.
Status AddCuda(const Tensor& a, const Tensor& b, Tensor* out, CudaStream& stream);

// --- Embedding bags, concatenation, interactions, loss -----------------------

// As EmbeddingBagForward, with rows, row_index (i64) and offsets (i64) on the
// device. Offsets and indices are not checked; an index outside [0, U) is
// skipped and bags are clamped to [0, nnz). Each bag is summed in row_index
// order, so the result is bit-identical to the CPU operator.
Status EmbeddingBagForwardCuda(const Tensor& rows, const Tensor& row_index, const Tensor& offsets,
                               Pooling pooling, Tensor* out, CudaStream& stream);
// As EmbeddingBagBackward: the positions are sorted by row (a stable radix
// sort), then each (row, column) sums its bags in row_index order with no
// atomics: deterministic and bit-identical to the CPU operator.
Status EmbeddingBagBackwardCuda(const Tensor& dout, const Tensor& row_index,
                                const Tensor& offsets, Pooling pooling, Tensor* drows,
                                CudaStream& stream);

// As ConcatColumns / SplitColumns (one strided copy per block).
Status ConcatColumnsCuda(const std::vector<Tensor>& inputs, Tensor* out, CudaStream& stream);
Status SplitColumnsCuda(const Tensor& din, std::vector<Tensor>* outputs, CudaStream& stream);

// As DotInteractionForward / Backward: one strided batched SGEMM of every
// sample's features with themselves, and the lower triangle gathered.
Status DotInteractionForwardCuda(const Tensor& features, Tensor* out, CudaStream& stream);
Status DotInteractionBackwardCuda(const Tensor& features, const Tensor& dout, Tensor* dfeatures,
                                  CudaStream& stream);

// As FmInteractionForward / Backward (ops/fm_interaction.h).
Status FmInteractionForwardCuda(const Tensor& features, Tensor* out, CudaStream& stream);
Status FmInteractionBackwardCuda(const Tensor& features, const Tensor& dout, Tensor* dfeatures,
                                 CudaStream& stream);

// As SigmoidCrossEntropyWithLogits: the mean loss is summed in double on the
// device in a fixed order and copied back, so this synchronises the stream.
// InvalidArgument naming the first index of a label outside [0, 1] (found on
// the device) and on an empty batch.
Result<double> SigmoidCrossEntropyWithLogitsCuda(const Tensor& logits, const Tensor& labels,
                                                 Tensor* dlogits, CudaStream& stream);

// --- DCN-v2 cross layers (ops/cross_layer.h), composed of the fully connected
// GEMMs and elementwise kernels ------------------------------------------------
// The optional saved_z (and, low rank, saved_t: both or neither) are those of
// the CPU operators: the forward writes z = xl W^T + bias [B, d] (t = xl V
// [B, r]) there and the backward reads them instead of recomputing them, with
// the same results bit for bit.

Status CrossLayerForwardCuda(const Tensor& x0, const Tensor& xl, const Tensor& weight,
                             const Tensor& bias, Tensor* out, CudaStream& stream,
                             Tensor* saved_z = nullptr);
Status CrossLayerBackwardCuda(const Tensor& x0, const Tensor& xl, const Tensor& weight,
                              const Tensor& bias, const Tensor& dout, Tensor* dx0, Tensor* dxl,
                              Tensor* dweight, Tensor* dbias, CudaStream& stream,
                              const Tensor* saved_z = nullptr);
Status LowRankCrossLayerForwardCuda(const Tensor& x0, const Tensor& xl, const Tensor& u,
                                    const Tensor& v, const Tensor& bias, Tensor* out,
                                    CudaStream& stream, Tensor* saved_t = nullptr,
                                    Tensor* saved_z = nullptr);
Status LowRankCrossLayerBackwardCuda(const Tensor& x0, const Tensor& xl, const Tensor& u,
                                     const Tensor& v, const Tensor& bias, const Tensor& dout,
                                     Tensor* dx0, Tensor* dxl, Tensor* du, Tensor* dv,
                                     Tensor* dbias, CudaStream& stream,
                                     const Tensor* saved_t = nullptr,
                                     const Tensor* saved_z = nullptr);

// --- Mixture-of-experts routing (ops/moe_routing.h) ----------------------------

Status SoftmaxForwardCuda(const Tensor& logits, Tensor* probs, CudaStream& stream);
Status SoftmaxBackwardCuda(const Tensor& probs, const Tensor& dprobs, Tensor* dlogits,
                           CudaStream& stream);

// As RouteTopK, with the routing's tensors on the stream's device: the same
// experts (ties to the lower index), slots (claimed in token order, through a
// stable sort of the choices by expert) and gates as the CPU operator. Checks
// the probabilities and counts the dropped choices on the device, then
// synchronises the stream to report them.
Result<MoeRouting> RouteTopKCuda(const Tensor& probs, const MoeRoutingOptions& options,
                                 CudaStream& stream);
// As MoeGateBackward, MoeDispatch, MoeDispatchBackward, MoeCombine and
// MoeCombineBackward with a routing from RouteTopKCuda. The routing's indices
// are not checked; choices outside [0, E) x [0, capacity) are skipped.
Status MoeGateBackwardCuda(const Tensor& probs, const MoeRouting& routing, const Tensor& dgate,
                           Tensor* dprobs, CudaStream& stream);
Status MoeDispatchCuda(const Tensor& x, const MoeRouting& routing, Tensor* buffers,
                       CudaStream& stream);
Status MoeDispatchBackwardCuda(const Tensor& dbuffers, const MoeRouting& routing, Tensor* dx,
                               CudaStream& stream);
Status MoeCombineCuda(const Tensor& expert_out, const Tensor& gate, const MoeRouting& routing,
                      Tensor* out, CudaStream& stream);
Status MoeCombineBackwardCuda(const Tensor& expert_out, const Tensor& gate,
                              const MoeRouting& routing, const Tensor& dout, Tensor* dexpert_out,
                              Tensor* dgate, CudaStream& stream);

// MMoE's soft mixture (MixtureForward / MixtureBackward): out[B, H] = sum
// over e of gate[b, e] * experts[b, e, :], experts [B, E, H] or [B, E * H];
// dgate and dexperts may be null.
Status MixtureForwardCuda(const Tensor& gate, const Tensor& experts, Tensor* out,
                          CudaStream& stream);
Status MixtureBackwardCuda(const Tensor& gate, const Tensor& experts, const Tensor& dout,
                           Tensor* dgate, Tensor* dexperts, CudaStream& stream);

// --- Dropout (ops/dropout.h) ----------------------------------------------------

// The mask of the CPU operator, element for element: kept iff
// UniformAt(seed, step, i) >= rate, recomputed on the device.
Status DropoutForwardCuda(const Tensor& x, const DropoutOptions& options, uint64_t step,
                          Tensor* y, CudaStream& stream);
Status DropoutBackwardCuda(const Tensor& dy, const DropoutOptions& options, uint64_t step,
                           Tensor* dx, CudaStream& stream);

// --- Dense optimizers and clipping ---------------------------------------------

// Zeroed state for `param` (on a CUDA device) as the optimizer needs it.
Result<DenseOptimizerSlot> NewDenseOptimizerSlotCuda(const DenseOptimizerOptions& options,
                                                     const Tensor& param, CudaStream& stream);
// As DenseOptimizerStep, with param, grad and slot on the stream's device.
Status DenseOptimizerStepCuda(const DenseOptimizerOptions& options, int64_t step,
                              const Tensor& grad, Tensor* param, DenseOptimizerSlot* slot,
                              CudaStream& stream);
// As GlobalNorm: squares summed in double over fixed blocks (a tree within
// each block, then the block sums in order), the same bits from run to run.
// Synchronises the stream to return the norm.
Result<double> GlobalNormCuda(const std::vector<Tensor>& grads, CudaStream& stream);
// As ClipByGlobalNorm; synchronises the stream (for the norm it returns).
Result<double> ClipByGlobalNormCuda(double max_norm, std::vector<Tensor>* grads,
                                    CudaStream& stream);

}  // namespace ember::ops
