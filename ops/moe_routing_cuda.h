#pragma once

// The routing of the graph operators (ops/moe_routing_ops.h) on CUDA: the
// conversions between a MoeRouting's i32 experts and slots and the f32
// routing value [B, 2, k] that the operators pass between them. The other
// CUDA routing functions are in ops/dense_ops_cuda.h.

#include "core/cuda_stream.h"
#include "core/status.h"
#include "core/tensor.h"
#include "ops/moe_routing.h"

namespace ember::ops {

// encoded[b, 0, j] = routing.expert[b, j] and encoded[b, 1, j] =
// routing.slot[b, j], as f32, queued on `stream`; every tensor on its
// device.
Status EncodeMoeRoutingCuda(const MoeRouting& routing, Tensor* encoded, CudaStream& stream);

// The inverse: routing->expert and routing->slot, i32 [B, k], allocated here
// from the stream's memory, from encoded [B, 2, k] (rounded to the nearest
// integer, saturating); nothing else of *routing is set. Indices out of
// range are left to the routing kernels, which skip them.
Status DecodeMoeRoutingCuda(const Tensor& encoded, MoeRouting* routing, CudaStream& stream);

}  // namespace ember::ops
