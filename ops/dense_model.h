#pragma once

// The dense half of a CTR model: a graph of registered operators
// (ops/graph.h) run by a GraphExecutor, with its parameters' optimizer state.
// The graph's inputs are "dense" [num_dense] (absent for data without dense
// features) and "pooled" [pooled width] (the pooled embeddings of every
// slot), in that order; its one output is a logit per task. Which graph is
// the model's business (engine/model_zoo.h builds the zoo's); this class only
// runs it, on the CPU or on a CUDA device. Its callers hand it host tensors
// either way.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/communicator.h"
#include "core/device.h"
#include "core/status.h"
#include "core/tensor.h"
#include "ops/dense_optimizer.h"
#include "ops/expert_parallel.h"
#include "ops/graph.h"
#include "ops/graph_executor.h"
#include "ops/moe_expert_ops.h"
#include "ops/precision.h"

namespace ember::ops {

// Where and how a DenseModel runs.
struct DenseModelOptions {
  // Seeds the parameters' initial values (GraphExecutor::Create): the same
  // seed gives the same values on every device.
  uint64_t seed = 1;
  // Where the parameters, gradients, optimizer state and activations live.
  Device device = Device::Cpu();
  // The GEMM arithmetic of the fully connected layers (ops/precision.h).
  ComputePrecision precision = ComputePrecision::kF32;
  // On the CPU: the row shards each batch runs in (GraphExecutor::
  // set_row_shards): 0, one per thread of the arena that runs the step; 1,
  // none (every kernel on the whole batch with all the threads).
  int cpu_row_shards = 0;
};

// A trainable tensor with its gradient and optimizer state, on the model's
// device.
struct Parameter {
  Tensor value;
  Tensor grad;
  DenseOptimizerSlot slot;
};

// On a CUDA device, Forward and Backward copy their host inputs in and their
// results out on the model's stream through device buffers kept from step to
// step (reallocated only when a batch is larger than any before), and wait for
// the stream before returning; OptimizerStep queues its updates without
// waiting (the next call orders after them).
// Thread safety: none; one model belongs to one dense stage.
class DenseModel {
 public:
  // Runs `graph` (see the top of this file for its inputs and output).
  // InvalidArgument when the graph's inputs or outputs are not those, or on
  // bad options; FailedPrecondition for a CUDA device when Ember was built
  // without CUDA or the device is absent.
  static Result<std::unique_ptr<DenseModel>> Create(std::unique_ptr<Graph> graph,
                                                    const DenseModelOptions& options);

  // logits[B, num_tasks] from dense[B, num_dense] (not read when num_dense is 0)
  // and pooled[B, num_slots * dim], all on the host. On the CPU the inputs
  // must stay alive and unchanged until Backward. `*logits` is valid until the
  // next Forward. InvalidArgument naming an input on the wrong device or of
  // the wrong shape.
  // `training` (the default): a forward that a Backward may follow, whose
  // expert layers run expert-parallel when EnableExpertParallel was called
  // (every rank must then call it alike). false: an inference (evaluation,
  // prediction): every expert here, MoE layers routed without capacity
  // (ops/moe_routing_ops.h), and no Backward after it.
  Status Forward(const Tensor& dense, const Tensor& pooled, Tensor* logits,
                 bool training = true);
  // From dlogits[B, num_tasks] (after Forward), fills every parameter's grad and
  // dpooled[B, num_slots * dim] (both host tensors; dpooled allocated by the
  // caller). `loss_examples`: the examples the loss is a mean over when it
  // is more than this batch (every rank's batch), for the losses the graph
  // adds itself (KernelContext::loss_examples); 0: this batch.
  Status Backward(const Tensor& dlogits, Tensor* dpooled, int64_t loss_examples = 0);
  // During each Backward, `ready` gets each parameter's index in parameters()
  // as soon as its gradient is final (ops::GraphExecutor::
  // set_on_gradient_ready): their all-reduce may start while the backward of
  // the layers before them runs. Null: none.
  void set_on_gradient_ready(std::function<void(int parameter)> ready);

  // Divides the experts of the graph's expert layers among the ranks of
  // `comm` (not owned; the dense stage's, used from its thread), for the
  // training forwards and backwards that follow (ops/expert_parallel.h). On
  // a CUDA device `comm` must take device buffers (NCCL). InvalidArgument
  // when a layer's experts do not divide among the ranks. A graph without
  // expert layers is left as it was.
  Status EnableExpertParallel(Communicator* comm);
  bool expert_parallel() const { return experts_ != nullptr; }
  // Bytes this rank's expert layers sent to other ranks, and the seconds
  // they spent exchanging, since EnableExpertParallel (0 without it).
  int64_t expert_exchange_bytes() const;
  double expert_exchange_seconds() const;

  // Gives every parameter zeroed optimizer state for `options` on the model's
  // device (on the CPU: NewDenseOptimizerSlot).
  Status InitOptimizer(const DenseOptimizerOptions& options);
  // One update of every parameter from its grad (after Backward), in
  // parameters() order, on the model's device (on the CPU:
  // DenseOptimizerStep). `step` counts updates from 1. REQUIRES:
  // InitOptimizer with the same options.
  Status OptimizerStep(const DenseOptimizerOptions& options, int64_t step);

  // The parameters, on the model's device: on a CUDA device their tensors
  // cannot be read or written from the host (use the copies below).
  std::vector<Parameter*> parameters();
  // Host copies of every parameter's value and optimizer state (grad left
  // undefined; a slot tensor the optimizer does not use stays undefined), in
  // parameters() order: what a checkpoint saves. Waits for the stream.
  Result<std::vector<Parameter>> ParametersToHost();
  // Overwrites every parameter's value and optimizer state from host
  // tensors laid out as ParametersToHost gives them (what a checkpoint
  // restores). Waits for the stream. InvalidArgument, with nothing changed,
  // when the count or a tensor's size differs.
  Status ParametersFromHost(const std::vector<Parameter>& host);

  const Device& device() const { return options_.device; }
  // Where to allocate the host tensors this model copies to or from its
  // device (Forward's dense and pooled, Backward's dpooled): page-locked
  // memory for a CUDA model, whose copies from pageable memory go through
  // the driver's staging buffers at a fraction of the link's rate; the
  // process's host allocator on the CPU.
  Allocator* host_allocator() const;
  const DenseModelOptions& options() const { return options_; }
  // Per example: dense features (0: the graph has no "dense" input), pooled
  // embedding floats, and logits (tasks).
  int64_t num_dense() const { return num_dense_; }
  int64_t pooled_width() const { return pooled_width_; }
  int num_tasks() const { return num_tasks_; }
  const Graph& graph() const { return *graph_; }
  // Forward multiply-adds x2 of one example (from the graph's op costs).
  int64_t forward_flops_per_example() const;
  // The row ranges the last Forward ran in on the CPU (GraphExecutor::
  // set_row_shards): 0 or 1 for the whole batch at once. The pooled
  // embeddings' backward sums per range too (pipeline/training_step.h).
  int row_ranges() const;
  // What the MoE layers did in the last Forward (ops/moe_expert_ops.h); zeros
  // for a graph without them, and on a CUDA device (its activations are not
  // on the host).
  MoeStepStats moe_stats() const;

 private:
  DenseModel(const DenseModelOptions& options, std::unique_ptr<Graph> graph,
             std::unique_ptr<GraphExecutor> executor);

  // A view of `shape` on the first elements of `*buffer` (on the model's
  // device, or pinned host memory when `pinned`), which grows when too small.
  Result<Tensor> Reusable(Tensor* buffer, std::vector<int64_t> shape, bool pinned);
  // On a CUDA device: runs `body` and, when it fails, waits for the stream
  // (copies from the caller's tensors may still be queued) before returning
  // its error.
  Status WaitingOnFailure(const std::function<Status()>& body);
  // Copies host `tensor` (named `what` in errors) into a reusable buffer on
  // the device and returns the device view.
  Result<Tensor> CopyIn(const char* what, const Tensor& tensor, Tensor* buffer);

  DenseModelOptions options_;
  int64_t num_dense_ = 0;
  int64_t pooled_width_ = 0;
  int num_tasks_ = 1;
  std::unique_ptr<Graph> graph_;
  std::unique_ptr<GraphExecutor> executor_;
  std::vector<Parameter> parameters_;
  std::vector<Tensor> inputs_;  // Of the executor: on its device.
  // Reusable buffers of a model on a CUDA device (unused on the CPU).
  Tensor dense_buffer_, pooled_buffer_, dlogits_buffer_, dpooled_buffer_;
  Tensor logits_host_;  // Pinned.
  std::unique_ptr<ExpertParallel> experts_;  // Null: every expert here.
};

}  // namespace ember::ops
