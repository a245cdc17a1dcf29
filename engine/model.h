#pragma once

// The dense half of a CTR model: a graph of registered operators
// (ops/graph.h) built by the model zoo (engine/model_zoo.h) and run by a
// GraphExecutor. Its inputs are the dense features and the pooled
// embeddings of every slot; its output is a logit per task (one, the click,
// except for multi-task models). It runs on the CPU or on a CUDA device; its
// callers hand it host tensors either way.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/status.h"
#include "core/tensor.h"
#include "ops/dense_optimizer.h"
#include "ops/graph.h"
#include "ops/graph_executor.h"
#include "ops/precision.h"

namespace ember::engine {

// A trainable tensor with its gradient and optimizer state, on the model's
// device.
struct Parameter {
  Tensor value;
  Tensor grad;
  ops::DenseOptimizerSlot slot;
};

struct ModelOptions {
  // dlrm, deepfm, wide_deep, dcn_v2 or mmoe (see engine/model_zoo.h).
  std::string name = "dlrm";
  // Dense features; 0 for data without any (libSVM, libFFM).
  int num_dense = 13;
  int num_slots = 26;
  int embedding_dim = 16;
  // DLRM: widths of the bottom MLP after the dense input. Its output is one
  // of the interacting vectors, so it must be embedding_dim wide: when the
  // last width differs, a final layer to embedding_dim is added ({512, 256,
  // 64} and {512, 256, 64, 16} give the same network for dim 16).
  std::vector<int> bottom_mlp = {512, 256, 64};
  // Widths of the MLP before the final logit (DLRM's top MLP, the deep part
  // of the others).
  std::vector<int> top_mlp = {512, 256};
  // DCN-v2: cross layers, and their rank (0: full rank).
  int cross_layers = 3;
  int cross_rank = 0;
  // Labels (tasks) per example; more than one needs a multi-task model.
  int num_tasks = 1;
  // MMoE: experts shared by the tasks, and each expert's MLP widths (the
  // last is the width every task's gate mixes).
  int num_experts = 4;
  std::vector<int> expert_mlp = {256, 64};
  uint64_t seed = 1;
  // Where the dense half runs: its parameters, gradients, optimizer state and
  // activations live there. The same seed gives the same initial parameters
  // on every device. Default: the CPU.
  Device device = Device::Cpu();
  // The GEMM arithmetic of the fully connected layers on a CUDA device
  // (ops/precision.h: 16-bit inputs, f32 accumulation and f32 master weights);
  // the CPU computes in f32 only.
  ops::ComputePrecision precision = ops::ComputePrecision::kF32;
  // On the CPU: the row shards each batch runs in (ops::GraphExecutor::
  // set_row_shards): 0, one per thread of the arena that runs the step; 1,
  // none (every kernel on the whole batch with all the threads).
  int cpu_row_shards = 0;
};

// On a CUDA device, Forward and Backward copy their host inputs in and their
// results out on the model's stream through device buffers kept from step to
// step (reallocated only when a batch is larger than any before), and wait for
// the stream before returning; OptimizerStep queues its updates without
// waiting (the next call orders after them).
// Thread safety: none; one model belongs to one dense stage.
class DenseModel {
 public:
  // InvalidArgument on inconsistent options or an unknown model name;
  // FailedPrecondition for a CUDA device when Ember was built without CUDA or
  // the device is absent.
  static Result<std::unique_ptr<DenseModel>> Create(const ModelOptions& options);

  // logits[B, num_tasks] from dense[B, num_dense] (not read when num_dense is 0)
  // and pooled[B, num_slots * dim], all on the host. On the CPU the inputs
  // must stay alive and unchanged until Backward. `*logits` is valid until the
  // next Forward. InvalidArgument naming an input on the wrong device or of
  // the wrong shape.
  Status Forward(const Tensor& dense, const Tensor& pooled, Tensor* logits);
  // From dlogits[B, num_tasks] (after Forward), fills every parameter's grad and
  // dpooled[B, num_slots * dim] (both host tensors; dpooled allocated by the
  // caller).
  Status Backward(const Tensor& dlogits, Tensor* dpooled);

  // Gives every parameter zeroed optimizer state for `options` on the model's
  // device (on the CPU: ops::NewDenseOptimizerSlot).
  Status InitOptimizer(const ops::DenseOptimizerOptions& options);
  // One update of every parameter from its grad (after Backward), in
  // parameters() order, on the model's device (on the CPU:
  // ops::DenseOptimizerStep). `step` counts updates from 1. REQUIRES:
  // InitOptimizer with the same options.
  Status OptimizerStep(const ops::DenseOptimizerOptions& options, int64_t step);

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
  const ModelOptions& options() const { return options_; }
  const ops::Graph& graph() const { return *graph_; }
  // Forward multiply-adds x2 of one example (from the graph's op costs).
  int64_t forward_flops_per_example() const;

 private:
  DenseModel(const ModelOptions& options, std::unique_ptr<ops::Graph> graph,
             std::unique_ptr<ops::GraphExecutor> executor);

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

  ModelOptions options_;
  std::unique_ptr<ops::Graph> graph_;
  std::unique_ptr<ops::GraphExecutor> executor_;
  std::vector<Parameter> parameters_;
  std::vector<Tensor> inputs_;  // Of the executor: on its device.
  // Reusable buffers of a model on a CUDA device (unused on the CPU).
  Tensor dense_buffer_, pooled_buffer_, dlogits_buffer_, dpooled_buffer_;
  Tensor logits_host_;  // Pinned.
};

}  // namespace ember::engine
