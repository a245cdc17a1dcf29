#pragma once

// GraphExecutor: runs a Graph's forward and backward on one device (the CPU
// or a CUDA device) with the kernels of its registry for that device, holding
// the parameters, their gradients and the activations of the last forward
// (saved-for-backward outputs included; those get no gradient buffer), all on
// that device.

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/cuda_stream.h"
#include "core/device.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/threads.h"
#include "ops/graph.h"
#include "ops/precision.h"

namespace ember::ops {

// On a CUDA device every tensor the executor takes or gives is on that
// device, and all its work (kernels, gradient accumulation, fills, copies) is
// queued on its stream() without waiting: call stream()->Synchronize() before
// reading a result on the host.
// Thread safety: none; one executor per dense stage.
class GraphExecutor {
 public:
  // Parameters are initialised from `seed` (see Initializer), on the host and
  // then copied to `device`, so that a seed gives the same initial values on
  // every device. `stream` (CUDA only; borrowed, must outlive the executor)
  // is the stream to queue work on; null makes the executor create its own.
  // Returns FailedPrecondition when `device` is a CUDA device and Ember was
  // built without CUDA or the device is absent, InvalidArgument for a stream
  // of another device or a graph without outputs, NotFound naming the op when
  // a node's op has no kernel for the device; the errors of device memory.
  static Result<std::unique_ptr<GraphExecutor>> Create(const Graph* graph, uint64_t seed,
                                                       const Device& device = Device::Cpu(),
                                                       CudaStream* stream = nullptr);

  // Runs every node on `inputs` (one per graph input, in AddInput order,
  // each [B, per-example shape...] or [B, elements], on device()); the inputs
  // must stay alive and unchanged until Backward. InvalidArgument naming the
  // input on a shape mismatch or when it is on another device.
  Status Forward(const std::vector<Tensor>& inputs, bool training = true);
  // The value of graph output i after Forward ([B, shape...], on device()).
  const Tensor& output(int i) const;
  // From the gradient of the objective with respect to each output, fills
  // every parameter's gradient (overwritten) and, for each non-null
  // input_grads[i], the gradient with respect to graph input i. Every tensor
  // is on device(); InvalidArgument naming the tensor otherwise.
  Status Backward(const std::vector<Tensor>& output_grads, const std::vector<Tensor*>& input_grads);
  // Backward in two halves, for the zero-bubble pipeline schedules
  // (pipeline/schedule_kinds.h): BackwardInputs is Backward except that the
  // parameter gradients of the nodes that split them (their kernel's
  // KernelPair::splits_parameter_gradients, each of their parameters read by
  // that node alone: the CPU fully connected layer) wait for
  // BackwardWeights, which computes them from the output gradients and
  // activations the first half left. Together they give Backward's bits.
  // Between the two, parameter_deferred(i) says which gradients() are still
  // to come; Forward is then FailedPrecondition, and so is BackwardWeights
  // without a BackwardInputs before it.
  Status BackwardInputs(const std::vector<Tensor>& output_grads,
                        const std::vector<Tensor*>& input_grads);
  Status BackwardWeights();
  // Called during each Backward (the whole one, not its halves) with a
  // parameter's index as soon as its gradient in gradients() is final: in
  // one range, right after the backward kernel of its first reader (the last
  // to add to it), so that the last layers' gradients are ready while the
  // first layers' backward still runs (their all-reduce can start:
  // pipeline/gradient_buckets.h); with row shards, once the ranges' sums are
  // added. Every parameter once per Backward, on the calling thread; for a
  // device executor the kernels that wrote it may still be queued on
  // stream(). Called on the thread that runs the range (the calling thread,
  // or with row shards one of its arena's). Null (the default): none.
  void set_on_gradient_ready(std::function<void(int parameter)> ready) {
    on_gradient_ready_ = std::move(ready);
  }

  // Whether parameter i's gradient waits for BackwardWeights (the same after
  // every BackwardInputs).
  bool parameter_deferred(int i) const { return deferred_[static_cast<size_t>(i)] != 0; }

  // Parameters and their gradients, in Graph::parameters() order, on device().
  std::vector<Tensor>& parameters() { return parameters_; }
  std::vector<Tensor>& gradients() { return gradients_; }
  const std::vector<Tensor>& gradients() const { return gradients_; }
  const Graph& graph() const { return *graph_; }
  int64_t batch() const { return batch_; }
  const Device& device() const { return device_; }
  // The arithmetic of the GEMMs of kernels that offer a choice (the CUDA
  // fully connected layer; ops/precision.h), f32 by default. InvalidArgument
  // for 16-bit arithmetic on the CPU, whose kernels compute in f32.
  Status set_precision(ComputePrecision precision);
  ComputePrecision precision() const { return precision_; }
  // The stream of a CUDA executor; null on the CPU.
  CudaStream* stream() const { return stream_; }
  // Row shards (CPU, and graphs whose every op is rows_independent or
  // rows_grouped: a range is then a group of its own): each
  // batch is split into `shards` ranges of rows of equal size (within one),
  // and each range runs through all the nodes, forward and then backward, on
  // one thread with single-threaded kernels; the ranges run in parallel in
  // the calling thread's arena. A range's rows stay in its core's caches from
  // node to node, and no kernel pays for splitting work between threads. The
  // parameter gradients are each range's sums, added in range order. 1 (the
  // default) runs each kernel once on the whole batch, with the caller's
  // threads; 0 means one range per thread of the calling thread's arena at
  // each Forward (the Backward uses the Forward's split). A batch of fewer
  // than 64 rows a range runs in fewer ranges (at least one, still on one
  // thread; a graph with rows_grouped ops always runs in `shards` ranges,
  // or one per row of a smaller batch, since its results depend on them).
  // Results are a function of the number of ranges, not of the threads that
  // run them. InvalidArgument for shards < 0.
  Status set_row_shards(int shards);
  int row_shards() const { return row_shards_; }
  // The row ranges the last Forward ran in (0: none, the whole batch at once).
  // With row_shards 0 a one-thread arena runs one range, so that one thread
  // computes what each range of a several-thread run computes.
  int forward_row_ranges() const { return forward_shards_; }
  // Expert parallelism for the Forwards that follow and their Backwards
  // (ops/expert_parallel.h; not owned; null, the default: every expert
  // here). With it a several-thread arena runs the batch as one range, so
  // that one thread talks to the other ranks.
  void set_expert_parallel(ExpertParallel* experts) { experts_ = experts; }
  ExpertParallel* expert_parallel() const { return experts_; }
  // The examples the objective is a mean over, for the next Backward
  // (KernelContext::loss_examples): every rank's batch in a data-parallel
  // job. 0 (the default, and after each Backward): this batch.
  void set_loss_examples(int64_t examples) { loss_examples_ = examples; }
  // Value `id` of the last Forward (an input or an activation), on the
  // executor's device; undefined before the first.
  const Tensor& value(int id) const { return values_[static_cast<size_t>(id)]; }

 private:
  GraphExecutor(const Graph* graph, std::vector<const KernelPair*> kernels, const Device& device,
                CudaStream* stream, std::unique_ptr<CudaStream> owned_stream);
  Status InitializeParameters(uint64_t seed);
  // Fills node_splits_ and deferred_.
  void FindSplitNodes();
  Status EnsureBatch(int64_t batch);
  // An uninitialised f32 tensor on device().
  Result<Tensor> NewTensor(std::vector<int64_t> shape) const;
  // to += from, both on device().
  Status Accumulate(const Tensor& from, Tensor* to);
  // Where the gradient of value `in` goes when this node's kernel is not the
  // first to contribute to it: the k-th scratch buffer of the value (k counts
  // the node's earlier contributions to it), added in after the kernel.
  Result<Tensor> ScratchFor(std::vector<std::vector<Tensor>>* scratch, int in, int k,
                            const std::vector<int64_t>& shape);
  // The nodes' forward, or backward, over rows [begin, end) of the batch;
  // the backward writes parameter gradients to `parameter_grads` and takes
  // its scratch buffers from `scratch` (per value id).
  // `shard` numbers the range (0 for the whole batch): it picks the range's
  // bf16 copies.
  Status ForwardRows(int shard, int64_t begin, int64_t end, bool training);
  // Which part of the backward a pass runs: all of it, all but the deferred
  // parameter gradients (BackwardInputs), or those alone (BackwardWeights).
  enum class Pass { kWhole, kInputs, kWeights };
  Status RunBackward(Pass pass, const std::vector<Tensor>& output_grads,
                     const std::vector<Tensor*>& input_grads);
  Status BackwardRows(Pass pass, int shard, int64_t begin, int64_t end,
                      const std::vector<char>& skip, std::vector<char>* has_grad,
                      std::vector<Tensor>* parameter_grads,
                      std::vector<std::vector<Tensor>>* scratch);
  // How many row shards a batch runs in (0: none, every kernel on the whole
  // batch with the caller's threads); fn(shard, begin, end) on each, in
  // parallel.
  int ShardsFor(int64_t batch) const;
  Status RunShards(int shards, const std::function<Status(int, int64_t, int64_t)>& fn);
  // The tensor of value `id` (an input, a parameter or an activation).
  const Tensor& ValueTensor(int id) const;
  // Empties the bf16 copies (KernelContext::input_bf16); with `shards` > 0
  // (at a Forward), also makes room for that many ranges' copies when the
  // executor keeps them (bf16 on the CPU), or drops the room when not.
  void ResetBf16Copies(int shards);
  // Points the context's bf16 copy slots at the range's copies, if kept.
  void AddBf16Copies(int shard, const GraphNode& node, KernelContext* context);

  const Graph* graph_;
  std::vector<const KernelPair*> kernels_;  // Per node.
  Device device_;
  ComputePrecision precision_ = ComputePrecision::kF32;
  std::unique_ptr<CudaStream> owned_stream_;  // When Create was given none.
  CudaStream* stream_;                        // Null on the CPU.
  std::vector<Tensor> parameters_;
  std::vector<Tensor> gradients_;
  std::vector<int> parameter_slot_;  // Value id -> index in parameters_, or -1.
  std::vector<int> first_reader_;     // Per parameter: the first node reading it, or -1.
  std::function<void(int)> on_gradient_ready_;
  std::vector<char> ready_;  // Per parameter: reported ready in this Backward.
  int64_t batch_ = -1;
  std::vector<Tensor> values_;    // Per value id: inputs (borrowed) and activations.
  std::vector<Tensor> grads_;     // Per value id, for backward.
  // Per value id: buffers for the contributions after the first (the k-th
  // one of a node that reads the value k + 1 times).
  std::vector<std::vector<Tensor>> scratch_;
  std::vector<int64_t> node_steps_;
  int row_shards_ = 1;
  int forward_shards_ = 0;         // The last Forward's, for its Backward.
  bool forward_training_ = true;   // Likewise.
  // Every node's op computes each row alone, or the rows it is given as a
  // group: the batch may run in row ranges.
  bool rows_independent_ = false;
  // Some node's op computes over its rows as a group: a batch runs in
  // row_shards ranges whatever its size.
  bool rows_grouped_ = false;
  ExpertParallel* experts_ = nullptr;
  int64_t loss_examples_ = 0;
  // Per node: whether it defers its parameter gradients (BackwardInputs);
  // per parameter slot: whether its gradient is deferred.
  std::vector<char> node_splits_;
  std::vector<char> deferred_;
  // After BackwardInputs, until BackwardWeights: which values had a gradient
  // at its end, per row range (one for the whole batch).
  bool weights_pending_ = false;
  std::vector<std::vector<char>> pending_has_grad_;
  // Per shard after the first: parameter gradients and scratch buffers.
  std::vector<std::vector<Tensor>> shard_gradients_;
  std::vector<std::vector<std::vector<Tensor>>> shard_scratch_;
  std::vector<std::unique_ptr<ThreadArena>> shard_arenas_;  // One thread each.
  // Per row range (one for the whole batch), per value id: the bf16 copies of
  // a step, kept from the Forward to the end of the Backward; empty unless the
  // executor computes in bf16 on the CPU. Each bf16 product's operand is
  // rounded once a step instead of once per use (forward, backward, and the
  // next layer's forward), and a layer's output is rounded in the pass that
  // writes it. DLRM in bf16 on 2 threads (tools/bench/suite.py's case, 3
  // epochs): the rounding passes 12.3% -> 7.5% of the run's profile, +1.8%
  // samples/s (3 alternating pairs): the products now read the cold copies.
  std::vector<std::vector<Tensor>> bf16_copies_;
};

}  // namespace ember::ops
