#pragma once

// A ChunkWork (pipeline/stage_executor.h) that runs the chunks of a dense
// graph (ops/graph.h) cut by a partition (scheduler/pipeline_partition.h):
// each chunk is a small graph of its nodes run by GraphExecutors on the CPU;
// what later chunks read (activations, and graph inputs or activations that
// pass through a chunk on their way to a later one, such as DCN's x0) and
// their gradients travel between ranks as floats; the last chunk takes the
// sigmoid cross-entropy of the graph's output; the first keeps the gradient
// of the graph's inputs (the pooled embeddings' gradient, for the push); and
// each chunk sums its parameter gradients over the step's micro-batches in
// the order its backwards run before a dense optimizer applies them.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/cuda_stream.h"
#include "core/device.h"
#include "core/status.h"
#include "core/tensor.h"
#include "ops/dense_optimizer.h"
#include "ops/graph.h"
#include "ops/graph_executor.h"
#include "pipeline/schedule.h"
#include "pipeline/stage_executor.h"
#include "scheduler/pipeline_partition.h"

namespace ember::pipeline {

// One chunk of a cut graph and the message layout around it.
struct GraphChunk {
  // The chunk's nodes (same names, ops, attributes; saved outputs alike) and
  // parameters (same names, shapes and initialisers, so that a seed gives
  // them the values it gives the whole graph's). Its inputs are the values
  // of `carried_in`, in order; its outputs those of `carried_out` (the whole
  // graph's outputs for the last chunk), a value that only passes through
  // copied by a node "pass.<value>" after the chunk's own.
  std::unique_ptr<ops::Graph> graph;
  // The whole graph's value ids that the message into the chunk carries, in
  // order, each [B, elements]: for chunk 0 the graph's inputs; for chunk c
  // every value made before c (a graph input, or an activation of an earlier
  // chunk) that c or a later chunk reads.
  std::vector<int> carried_in;
  // What the chunk's output message carries: chunk c + 1's carried_in (empty
  // for the last chunk).
  std::vector<int> carried_out;
};

// Cuts `graph` into one GraphChunk per chunk of `partition`.
// Unimplemented when a graph output is not made by the last chunk;
// InvalidArgument when the partition does not cover the graph's nodes in
// order.
Result<std::vector<GraphChunk>> CutGraph(const ops::Graph& graph,
                                         const scheduler::PipelinePartition& partition);

struct GraphChunkWorkOptions {
  // Where the chunks' parameters, optimizer state and activations live and
  // run: the CPU, or a CUDA device (one stream for the rank's chunks; the
  // messages stay host floats, copied in and out at the chunk's edges).
  Device device = Device::Cpu();
  // Examples per micro-batch, unless set_micro_batch_sizes says otherwise.
  int64_t micro_batch_size = 64;
  // Initialises the parameters (GraphExecutor::Create).
  uint64_t seed = 1;
  ops::DenseOptimizerOptions optimizer;
  // The loss of a micro-batch is its summed sigmoid cross-entropy over this
  // many outputs (ops::SigmoidCrossEntropyWithLogits's mean_over): the
  // step's, so that the summed gradients are those of the mean over the
  // step. 0: the micro-batch's own outputs. set_loss_mean_over changes it.
  int64_t loss_mean_over = 0;
};

// One micro-batch: the whole graph's inputs ([B, elements] each, host) and
// the labels of its output ([B] or [B, tasks]).
struct MicroBatchData {
  std::vector<Tensor> inputs;
  Tensor labels;
};

// A parameter of the rank's chunks with its optimizer state, on the host.
struct ChunkParameter {
  std::string name;
  Tensor value;
  ops::DenseOptimizerSlot slot;
};

// Thread safety: none; one rank's thread calls every method.
class GraphChunkWork final : public ChunkWork {
 public:
  // The chunks of `rank` under `shape` (chunk c when c % p == rank), cut
  // from `graph` by `partition` (p·v chunks). The errors of CutGraph and
  // GraphExecutor::Create; InvalidArgument when the partition's chunk count
  // is not shape.chunks() or an option is out of range; Unimplemented naming
  // the node when the graph has an op that routes a batch's rows as one
  // group (OpDef::rows_grouped, MoE): micro-batches would change its groups.
  static Result<std::unique_ptr<GraphChunkWork>> Create(
      const ops::Graph& graph, const scheduler::PipelinePartition& partition,
      const ScheduleShape& shape, int rank, const GraphChunkWorkOptions& options);
  ~GraphChunkWork() override;
  GraphChunkWork(const GraphChunkWork&) = delete;
  GraphChunkWork& operator=(const GraphChunkWork&) = delete;

  // The step's micro-batches (borrowed until the next call): read by the
  // forward of chunk 0 and the backward of the last chunk, so needed on
  // their ranks only. Set before each step.
  void set_micro_batches(const std::vector<MicroBatchData>* micro_batches) {
    micro_batches_ = micro_batches;
  }
  // Examples of each of the step's micro-batches (every rank must set the
  // same); empty: options.micro_batch_size each.
  void set_micro_batch_sizes(std::vector<int64_t> sizes) { sizes_ = std::move(sizes); }
  void set_loss_mean_over(int64_t outputs) { options_.loss_mean_over = outputs; }
  // Optimizer steps taken so far: the next OptimizerStep is step `steps` + 1.
  void set_optimizer_steps(int64_t steps) { step_ = steps; }
  // Data ranks that train the same chunks on batches of their own (not
  // owned; null: none): OptimizerStep first all-reduces the step's summed
  // gradients over them (one collective for the rank's chunks on the CPU,
  // one per parameter on a device), as the data-parallel dense step does
  // (pipeline/training_step.h), so that every rank applies the same update.
  void set_gradient_reducer(Communicator* ranks) { reducer_ = ranks; }

  int64_t OutputElements(int micro_batch, int chunk) const override;
  Status Forward(int micro_batch, int chunk, const std::vector<float>& input,
                 std::vector<float>* output) override;
  Status Backward(int micro_batch, int chunk, const std::vector<float>& output_grad,
                  std::vector<float>* input_grad) override;
  // The halves of Backward (GraphExecutor::BackwardInputs and
  // BackwardWeights): the parameter gradients of the chunk's fully
  // connected layers on the CPU are added to the sums by BackwardWeight,
  // the others' by BackwardInput; the micro-batch's executor and carried
  // values are held until BackwardWeight. Summed in the order each half
  // runs, so a schedule that runs each half in micro-batch order per chunk
  // (zb-h1) sums what 1F1B sums, in 1F1B's order.
  Status BackwardInput(int micro_batch, int chunk, const std::vector<float>& output_grad,
                       std::vector<float>* input_grad) override;
  Status BackwardWeight(int micro_batch, int chunk) override;
  // FailedPrecondition while a BackwardInput waits for its BackwardWeight.
  Status OptimizerStep() override;

  // Host copies of the rank's parameters with their optimizer state, chunk
  // by chunk in each chunk's order (a slot tensor the optimizer does not use
  // stays undefined).
  Result<std::vector<ChunkParameter>> ParametersToHost();
  // Sets the rank's parameters and optimizer state from host tensors laid
  // out as ParametersToHost gives them. InvalidArgument, with nothing
  // changed, when a name or size differs.
  Status ParametersFromHost(const std::vector<ChunkParameter>& parameters);
  // The losses of the last step's micro-batches on the last chunk, summed in
  // backward order (0 on other ranks).
  double step_loss() const { return step_loss_; }
  // On the last chunk's rank, after the micro-batch's backward in this
  // step: its logits ([B, tasks]).
  Result<Tensor> Logits(int micro_batch) const;
  // On chunk 0's rank, after the micro-batch's backward in this step: the
  // gradient of the whole graph's input `input` ([B, elements]).
  Result<Tensor> InputGradient(int micro_batch, int input) const;

 private:
  // The reducer's all-reduce of every chunk's summed gradients.
  Status ReduceGradients();
  struct Chunk;
  // Backward, or with `split` BackwardInput.
  Status RunBackward(int micro_batch, int chunk, const std::vector<float>& output_grad,
                     std::vector<float>* input_grad, bool split);
  // Adds the executor's parameter gradients to the chunk's sums: all of
  // them, those of the first half of a split backward, or of the second.
  enum class Half { kBoth, kFirst, kSecond };
  Status AddToSums(Chunk& c, const ops::GraphExecutor& executor, Half half);
  GraphChunkWork(const GraphChunkWorkOptions& options, const ScheduleShape& shape, int rank);
  Result<Chunk*> Find(int chunk);
  // An executor of `chunk` for a new micro-batch, sharing the chunk's
  // parameters (an idle one, or a new one).
  Result<int> TakeExecutor(Chunk& chunk);
  int64_t MicroBatchSize(int micro_batch) const;
  // A host tensor's copy on the work's device (itself on the CPU), and back.
  Result<Tensor> ToDevice(const Tensor& host) const;
  Result<Tensor> ToHost(const Tensor& tensor) const;
  // Zeros of `shape` on the work's device.
  Result<Tensor> DeviceZeros(const std::vector<int64_t>& shape) const;
  // Splits a message of `values`' per-example widths into [B, elements]
  // tensors; InvalidArgument naming `what` when its size is not theirs.
  Result<std::vector<Tensor>> Split(const std::vector<float>& message,
                                    const std::vector<int>& values, int64_t batch,
                                    const std::string& what) const;

  GraphChunkWorkOptions options_;
  ScheduleShape shape_;
  int rank_;
  // On a CUDA device, the stream of every executor of the rank (declared
  // before chunks_, so that it outlives them).
  std::unique_ptr<CudaStream> stream_;
  Communicator* reducer_ = nullptr;
  std::vector<float> packed_gradients_;  // The reducer's buffer on the CPU.
  std::vector<int64_t> value_elements_;  // Per whole-graph value id.
  std::vector<std::unique_ptr<Chunk>> chunks_;  // The rank's, by local index.
  std::vector<int64_t> carried_out_elements_;  // Per example, of every chunk.
  std::vector<int64_t> sizes_;
  const std::vector<MicroBatchData>* micro_batches_ = nullptr;
  std::map<int, Tensor> logits_;                     // Last chunk: per micro-batch.
  std::map<int, std::vector<Tensor>> input_grads_;  // Chunk 0: per micro-batch.
  int64_t step_ = 0;
  double step_loss_ = 0;
  double running_loss_ = 0;
};

}  // namespace ember::pipeline
