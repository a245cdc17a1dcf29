#pragma once

// The operator registry: what each operator is (its name, how its output
// shapes follow from its inputs, what it costs) and, per device, the kernels
// that run its forward and backward. Filled by explicit registration calls
// (RegisterCpuOps, and RegisterCudaOps in a CUDA build), never by static
// initialisers, so that what a binary can run is visible in one place.
//
// Shapes. A value is either batched (an input or an activation: its shape is
// per example, the batch dimension implicit and first) or a parameter (its
// full shape). OpDef::infer sees the per-example shapes of batched inputs and
// the full shapes of parameters, and returns per-example output shapes.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/cuda_stream.h"
#include "core/device.h"
#include "core/status.h"
#include "core/tensor.h"
#include "ops/op_cost.h"
#include "ops/precision.h"

namespace ember::ops {

class ExpertParallel;  // ops/expert_parallel.h

// Named numeric attributes of a node ("activation", "features", ...).
class OpAttrs {
 public:
  OpAttrs& Set(const std::string& name, double value) {
    values_[name] = value;
    return *this;
  }
  double Get(const std::string& name, double fallback) const;
  int64_t GetInt(const std::string& name, int64_t fallback) const;
  const std::map<std::string, double>& values() const { return values_; }

 private:
  std::map<std::string, double> values_;
};

// What a kernel reads and writes. Forward: `inputs` -> `outputs`
// (allocated by the caller with the inferred shapes, saved outputs included).
// Backward: also reads the forward's `outputs` and `output_grads` (null for
// the saved outputs, see OpDef::saved_outputs), and overwrites each non-null
// `input_grads[i]` (same shape as inputs[i]) with the gradient of the
// objective with respect to inputs[i]. Batched tensors have the batch first.
struct KernelContext {
  const OpAttrs* attrs = nullptr;
  std::vector<const Tensor*> inputs;
  std::vector<Tensor*> outputs;
  std::vector<const Tensor*> output_grads;
  std::vector<Tensor*> input_grads;
  // Whether the backward may write over `output_grads` (as scratch): true
  // when nothing reads them afterwards, as in GraphExecutor, which owns them
  // and is done with a value's gradient once its producer's backward ran.
  bool output_grads_disposable = false;
  // Counts calls of the op's node (for seeded ops such as dropout).
  int64_t step = 0;
  // Training (dropout active) or inference.
  bool training = true;
  // The stream CUDA kernels queue their work on (tensors then live on its
  // device); null for CPU kernels.
  CudaStream* stream = nullptr;
  // The GEMM arithmetic of kernels that offer a choice (the fully connected
  // layer: f32 or bf16 on the CPU, any on CUDA); kF32 for the others.
  ComputePrecision precision = ComputePrecision::kF32;
  // bf16 copies the executor keeps from a node's forward to its backward
  // (CPU executors computing in bf16; empty vectors otherwise): one slot per
  // input and per output, null where none is kept. A slot is either
  // undefined or holds the value rounded to bf16 (FloatToBFloat16, element
  // by element) as a 2-D tensor: [rows, elements per row] for a batched
  // value, the value's own shape for a 2-D parameter. A kernel that rounds a
  // value fills its undefined slot; one that needs the rounding uses a filled
  // slot instead of rounding again. The executor empties every slot at each
  // Forward (parameters change between steps) and after each Backward.
  std::vector<Tensor*> input_bf16;
  std::vector<Tensor*> output_bf16;
  // The examples the model's objective is a mean over: every rank's batch,
  // every row range of it (GraphExecutor sets it, at least the executor's
  // batch). An op that adds a loss of its own (moe_balance) scales its
  // gradient by it, so that the loss weighs the same however the batch is
  // split. 0 outside an executor: the rows the kernel is given.
  int64_t loss_examples = 0;
  // Expert parallelism (ops/expert_parallel.h): the ranks among which the
  // experts of moe_expert_fc are divided, and where such a kernel keeps what
  // its backward needs. Null (the default): every expert is here.
  ExpertParallel* experts = nullptr;
  // The node's index in its graph (-1 outside one): keys what a kernel
  // keeps through `experts` from its forward to its backward.
  int node = -1;
};

using Kernel = std::function<Status(KernelContext&)>;

// One input's shape as OpDef::infer sees it.
struct InputShape {
  std::vector<int64_t> shape;
  bool batched = true;
};

struct OpDef {
  std::string name;
  // Number of inputs; -1: any number >= 1.
  int num_inputs = 1;
  // Per-example output shapes, or InvalidArgument naming what does not fit.
  std::function<Result<std::vector<std::vector<int64_t>>>(const std::vector<InputShape>&,
                                                          const OpAttrs&)>
      infer;
  // How many of the last outputs of `infer` are saved for the backward:
  // intermediates the forward writes so that the backward reads them instead
  // of recomputing them (the z = W x + b of a cross layer). They are real
  // memory held from the forward to the backward, but no gradient flows
  // through them: the backward gets a null output gradient for them, and no
  // other node may read them (Graph::AddNode refuses it). At least one output
  // must not be saved. Default: none.
  int saved_outputs = 0;
  // Whether the op computes each example (a row of its batched inputs and
  // outputs) from that example alone, whatever the batch's size and the row's
  // position in it, so that its kernels may run on any range of rows and give
  // the same rows (GraphExecutor::set_row_shards); parameter gradients are
  // then sums over the ranges. Not dropout: its mask is indexed by position.
  bool rows_independent = false;
  // Whether the op computes over the rows it is given as one group of
  // examples (GShard's groups): the MoE routing's capacity, the balance
  // loss' statistics. Run on a range of rows, it treats the range as a
  // group of its own, so a graph of such ops and rows_independent ones still
  // runs in row shards, each range a group, with results a function of the
  // ranges (GraphExecutor::set_row_shards); a rank of a data-parallel job is
  // such a range of the job's batch.
  bool rows_grouped = false;
  // Work of the forward (backward = false) or the backward at `batch`.
  std::function<OpCost(const std::vector<InputShape>&, const OpAttrs&, int64_t batch,
                       bool backward)>
      cost;
};

struct KernelPair {
  Kernel forward;
  Kernel backward;
  // Whether `backward` computes the input gradients and the parameter
  // gradients apart: given null parameter gradients it computes the input
  // gradients alone, and given null input gradients (after such a call, on
  // the output gradients that call may have overwritten) the parameter
  // gradients alone, each with the bits of one call computing both. The
  // zero-bubble schedules run the two halves at different times
  // (GraphExecutor::BackwardInputs); a kernel without it runs whole in the
  // first.
  bool splits_parameter_gradients = false;
};

// Thread safety: registration before use; lookups may then run concurrently.
class OpRegistry {
 public:
  // AlreadyExists for a second op of the same name; InvalidArgument for
  // negative saved_outputs.
  Status RegisterOp(OpDef op);
  // NotFound for an op not registered; AlreadyExists for a second kernel
  // of the op on that device type.
  Status RegisterKernel(const std::string& op, DeviceType device, KernelPair kernels);

  // NotFound naming the op.
  Result<const OpDef*> FindOp(const std::string& op) const;
  // NotFound naming the op and the device.
  Result<const KernelPair*> FindKernel(const std::string& op, DeviceType device) const;
  bool HasKernel(const std::string& op, DeviceType device) const;
  std::vector<std::string> OpNames() const;

 private:
  std::map<std::string, OpDef> ops_;
  std::map<std::pair<std::string, DeviceType>, KernelPair> kernels_;
};

// Registers every operator and its CPU kernels: fully_connected (x, weight,
// bias; attr activation: 0 none, 1 relu), concat (any number of inputs),
// dot_interaction and fm_interaction (attr features: the input is that many
// vectors side by side), add, cross_layer (x0, xl, weight, bias; output 1
// saves z), cross_layer_low_rank (x0, xl, u, v, bias; outputs 1 and 2 save t
// and z), dropout (attrs rate, seed; identity outside training), softmax,
// mixture (gate [E], experts [E * H] -> [H]), and the mixture-of-experts
// routing moe_route, moe_dispatch and moe_combine (ops/moe_routing_ops.h).
Status RegisterCpuOps(OpRegistry* registry);

// Registers a CUDA kernel (queued on KernelContext::stream) for every
// operator of RegisterCpuOps, which must have run first. In a build without
// CUDA it registers nothing and returns OK.
Status RegisterCudaOps(OpRegistry* registry);

// The registry of this binary: RegisterCpuOps, plus the CUDA kernels when
// built with CUDA. Built on first use.
const OpRegistry& DefaultOpRegistry();

}  // namespace ember::ops
