#pragma once

// A ChunkWork (pipeline/stage_executor.h) that runs the chunks of a dense
// graph (ops/graph.h) cut by a partition (scheduler/pipeline_partition.h):
// each chunk is a small graph of its nodes run by GraphExecutors on the CPU,
// its output (the activations the next chunk reads) and that output's
// gradient travel between ranks as floats, the last chunk takes the sigmoid
// cross-entropy of the graph's output, and each chunk sums its parameter
// gradients over the step's micro-batches in the order its backwards run
// before a dense optimizer applies them.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/dense_optimizer.h"
#include "ops/graph.h"
#include "ops/graph_executor.h"
#include "pipeline/schedule.h"
#include "pipeline/stage_executor.h"
#include "scheduler/pipeline_partition.h"

namespace ember::pipeline {

// Cuts `graph` into one graph per chunk of `partition`. Chunk c's graph has
// c's nodes (same names, ops, attributes; saved outputs alike) and
// parameters (same names, shapes and initialisers, so a seed gives them the
// values it gives the whole graph's). Its inputs are the whole graph's
// inputs (chunk 0) or the activations that chunk c - 1 makes and later
// chunks read, in the order they were made; its outputs are those of the
// next chunk's inputs it makes, or the whole graph's outputs (last chunk).
// Unimplemented naming the value when a chunk after the first reads a graph
// input or a value made two or more chunks before (it would have to pass
// through a chunk), or a graph output is not made by the last chunk;
// InvalidArgument when the partition does not cover the graph's nodes.
Result<std::vector<std::unique_ptr<ops::Graph>>>
CutGraph(const ops::Graph &graph,
         const scheduler::PipelinePartition &partition);

struct GraphChunkWorkOptions {
  // Examples per micro-batch: every micro-batch has this many.
  int64_t micro_batch_size = 64;
  // Initialises the parameters (GraphExecutor::Create).
  uint64_t seed = 1;
  ops::DenseOptimizerOptions optimizer;
  // The loss of a micro-batch is its summed sigmoid cross-entropy over this
  // many examples (ops::SigmoidCrossEntropyWithLogits's mean_over): the
  // step's examples, so that the summed gradients are those of the mean over
  // the step. 0: micro_batch_size.
  int64_t loss_mean_over = 0;
};

// One micro-batch: the whole graph's inputs ([B, elements] each, host) and
// the labels of its output ([B] or [B, tasks]).
struct MicroBatchData {
  std::vector<Tensor> inputs;
  Tensor labels;
};

// Thread safety: none; one rank's thread calls every method.
class GraphChunkWork final : public ChunkWork {
public:
  // The chunks of `rank` under `shape` (chunk c when c % p == rank), cut
  // from `graph` by `partition` (p·v chunks). The errors of CutGraph and
  // GraphExecutor::Create; InvalidArgument when the partition's chunk count
  // is not shape.chunks() or an option is out of range.
  static Result<std::unique_ptr<GraphChunkWork>>
  Create(const ops::Graph &graph, const scheduler::PipelinePartition &partition,
         const ScheduleShape &shape, int rank,
         const GraphChunkWorkOptions &options);
  ~GraphChunkWork() override;
  GraphChunkWork(const GraphChunkWork &) = delete;
  GraphChunkWork &operator=(const GraphChunkWork &) = delete;

  // The step's micro-batches (borrowed until the next call): read by the
  // forward of chunk 0 and the backward of the last chunk. Set before each
  // step.
  void set_micro_batches(const std::vector<MicroBatchData> *micro_batches) {
    micro_batches_ = micro_batches;
  }

  int64_t OutputElements(int chunk) const override;
  Status Forward(int micro_batch, int chunk, const std::vector<float> &input,
                 std::vector<float> *output) override;
  Status Backward(int micro_batch, int chunk,
                  const std::vector<float> &output_grad,
                  std::vector<float> *input_grad) override;
  Status OptimizerStep() override;

  // The rank's parameters by name (host tensors, shared with the executors).
  std::vector<std::pair<std::string, Tensor>> parameters() const;
  // The losses of the last step's micro-batches on the last chunk, summed in
  // backward order (0 on other ranks).
  double step_loss() const { return step_loss_; }

private:
  struct Chunk;
  GraphChunkWork(const GraphChunkWorkOptions &options,
                 const ScheduleShape &shape, int rank);
  Result<Chunk *> Find(int chunk);
  // An executor of `chunk` for a new micro-batch, sharing the chunk's
  // parameters (an idle one, or a new one).
  Result<int> TakeExecutor(Chunk &chunk);

  GraphChunkWorkOptions options_;
  ScheduleShape shape_;
  int rank_;
  std::vector<std::unique_ptr<Chunk>> chunks_; // The rank's, by local index.
  std::vector<int64_t> output_elements_;       // Per example, of every chunk.
  const std::vector<MicroBatchData> *micro_batches_ = nullptr;
  int64_t step_ = 0;
  double step_loss_ = 0;
  double running_loss_ = 0;
};

} // namespace ember::pipeline
