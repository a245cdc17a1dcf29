#include "pipeline/graph_chunk_work.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "ops/dense_ops.h"

namespace ember::pipeline {
namespace {

// Per value id: the chunks whose nodes read it.
std::vector<std::vector<int>>
ReaderChunks(const ops::Graph &graph,
             const scheduler::PipelinePartition &partition) {
  std::vector<std::vector<int>> readers(graph.values().size());
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    const int chunk = partition.ChunkOf(static_cast<int>(n));
    for (int v : graph.nodes()[n].inputs)
      readers[v].push_back(chunk);
  }
  return readers;
}

// The values chunk c makes that chunk c + 1 reads (none for the last), or
// Unimplemented for a value that would pass through a chunk.
Result<std::vector<std::vector<int>>>
Boundaries(const ops::Graph &graph,
           const scheduler::PipelinePartition &partition) {
  const int chunks = static_cast<int>(partition.chunks.size());
  const std::vector<std::vector<int>> readers = ReaderChunks(graph, partition);
  std::vector<std::vector<int>> out(static_cast<size_t>(chunks));
  for (size_t v = 0; v < graph.values().size(); ++v) {
    const ops::GraphValue &value = graph.values()[v];
    if (value.kind == ops::ValueKind::kParameter)
      continue;
    const int made = value.kind == ops::ValueKind::kInput
                         ? 0
                         : partition.ChunkOf(value.producer);
    for (int reader : readers[v]) {
      const bool input = value.kind == ops::ValueKind::kInput;
      if ((input && reader > 0) || (!input && reader > made + 1)) {
        return Status::Unimplemented(
            "pipeline chunks: chunk ", reader, " reads \"", value.name,
            "\", made ", input ? "as a graph input" : "by chunk ",
            input ? "" : std::to_string(made),
            "; values cannot pass through a chunk yet");
      }
    }
    if (value.kind == ops::ValueKind::kActivation && made + 1 < chunks &&
        std::find(readers[v].begin(), readers[v].end(), made + 1) !=
            readers[v].end()) {
      out[static_cast<size_t>(made)].push_back(static_cast<int>(v));
    }
  }
  for (int v : graph.outputs()) {
    if (partition.ChunkOf(graph.values()[v].producer) != chunks - 1) {
      return Status::Unimplemented(
          "pipeline chunks: graph output \"", graph.values()[v].name,
          "\" is made by chunk ", partition.ChunkOf(graph.values()[v].producer),
          ", not the last chunk ", chunks - 1);
    }
  }
  return out;
}

Result<std::unique_ptr<ops::Graph>>
CutChunk(const ops::Graph &graph, const scheduler::PipelineChunk &range,
         const std::vector<int> &inputs, const std::vector<int> &outputs) {
  auto sub = std::make_unique<ops::Graph>(&graph.registry());
  std::map<int, int> id; // Whole graph's value id -> the chunk's.
  for (int v : inputs) {
    EMBER_ASSIGN_OR_RETURN(
        id[v], sub->AddInput(graph.values()[v].name, graph.values()[v].shape));
  }
  for (int n = range.first_node; n < range.end_node; ++n) {
    const ops::GraphNode &node = graph.nodes()[n];
    std::vector<int> node_inputs;
    for (int v : node.inputs) {
      const ops::GraphValue &value = graph.values()[v];
      if (value.kind == ops::ValueKind::kParameter && !id.contains(v)) {
        EMBER_ASSIGN_OR_RETURN(id[v], sub->AddParameter(value.name, value.shape,
                                                        value.initializer,
                                                        value.fan_in));
      }
      node_inputs.push_back(id.at(v));
    }
    EMBER_ASSIGN_OR_RETURN(
        const std::vector<int> made,
        sub->AddNode(node.name, node.op, node_inputs, node.attrs));
    for (size_t i = 0; i < made.size(); ++i)
      id[node.outputs[i]] = made[i];
  }
  for (int v : outputs)
    EMBER_RETURN_IF_ERROR(sub->MarkOutput(id.at(v)));
  return sub;
}

int64_t ElementsOf(const ops::Graph &graph, const std::vector<int> &values) {
  int64_t n = 0;
  for (int v : values)
    n += graph.values()[v].elements();
  return n;
}

} // namespace

Result<std::vector<std::unique_ptr<ops::Graph>>>
CutGraph(const ops::Graph &graph,
         const scheduler::PipelinePartition &partition) {
  const int n = static_cast<int>(graph.nodes().size());
  int next = 0;
  for (const scheduler::PipelineChunk &chunk : partition.chunks) {
    if (chunk.first_node != next || chunk.end_node <= chunk.first_node) {
      return Status::InvalidArgument("pipeline chunks: chunk of nodes [",
                                     chunk.first_node, ", ", chunk.end_node,
                                     ") does not follow node ", next);
    }
    next = chunk.end_node;
  }
  if (next != n || partition.chunks.empty()) {
    return Status::InvalidArgument("pipeline chunks: the partition covers ",
                                   next, " of ", n, " nodes");
  }
  EMBER_ASSIGN_OR_RETURN(const std::vector<std::vector<int>> boundaries,
                         Boundaries(graph, partition));
  std::vector<std::unique_ptr<ops::Graph>> graphs;
  for (size_t c = 0; c < partition.chunks.size(); ++c) {
    const std::vector<int> &inputs =
        c == 0 ? graph.inputs() : boundaries[c - 1];
    const std::vector<int> &outputs =
        c + 1 == partition.chunks.size() ? graph.outputs() : boundaries[c];
    Result<std::unique_ptr<ops::Graph>> sub =
        CutChunk(graph, partition.chunks[c], inputs, outputs);
    if (!sub.ok())
      return sub.status().WithContext(internal::StrCat("pipeline chunk ", c));
    graphs.push_back(std::move(*sub));
  }
  return graphs;
}

struct GraphChunkWork::Chunk {
  int index = 0; // global
  std::unique_ptr<ops::Graph> graph;
  // executors[0] owns the parameters; the others share its tensors, one per
  // micro-batch in flight at once.
  std::vector<std::unique_ptr<ops::GraphExecutor>> executors;
  std::vector<int> idle;
  std::map<int, int> in_flight; // micro-batch -> executor
  std::map<int, std::vector<Tensor>>
      inputs; // micro-batch -> executor inputs, until backward
  std::vector<Tensor> grad_sums;              // per parameter
  std::vector<ops::DenseOptimizerSlot> slots; // per parameter
};

GraphChunkWork::GraphChunkWork(const GraphChunkWorkOptions &options,
                               const ScheduleShape &shape, int rank)
    : options_(options), shape_(shape), rank_(rank) {}

GraphChunkWork::~GraphChunkWork() = default;

Result<std::unique_ptr<GraphChunkWork>>
GraphChunkWork::Create(const ops::Graph &graph,
                       const scheduler::PipelinePartition &partition,
                       const ScheduleShape &shape, int rank,
                       const GraphChunkWorkOptions &options) {
  EMBER_RETURN_IF_ERROR(ValidateShape(shape));
  if (static_cast<int>(partition.chunks.size()) != shape.chunks()) {
    return Status::InvalidArgument("pipeline chunks: a partition of ",
                                   partition.chunks.size(), " chunks for ",
                                   shape.chunks(), " (", ToString(shape), ")");
  }
  if (rank < 0 || rank >= shape.ranks) {
    return Status::InvalidArgument("pipeline chunks: rank ", rank, " of ",
                                   ToString(shape));
  }
  if (options.micro_batch_size < 1 || options.loss_mean_over < 0) {
    return Status::InvalidArgument("pipeline chunks: micro_batch_size ",
                                   options.micro_batch_size,
                                   ", loss_mean_over ", options.loss_mean_over);
  }
  EMBER_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<ops::Graph>> graphs,
                         CutGraph(graph, partition));
  std::unique_ptr<GraphChunkWork> work(
      new GraphChunkWork(options, shape, rank));
  // Every chunk's: a rank receives the outputs of chunks it does not hold.
  for (const std::unique_ptr<ops::Graph> &g : graphs) {
    work->output_elements_.push_back(ElementsOf(*g, g->outputs()));
  }
  for (int c = rank; c < shape.chunks(); c += shape.ranks) {
    auto chunk = std::make_unique<Chunk>();
    chunk->index = c;
    chunk->graph = std::move(graphs[static_cast<size_t>(c)]);
    EMBER_ASSIGN_OR_RETURN(
        auto executor,
        ops::GraphExecutor::Create(chunk->graph.get(), options.seed));
    for (const Tensor &p : executor->parameters()) {
      chunk->grad_sums.push_back(Tensor::Zeros(p.shape()));
      chunk->slots.push_back(ops::NewDenseOptimizerSlot(options.optimizer, p));
    }
    chunk->executors.push_back(std::move(executor));
    chunk->idle.push_back(0);
    work->chunks_.push_back(std::move(chunk));
  }
  return work;
}

Result<GraphChunkWork::Chunk *> GraphChunkWork::Find(int chunk) {
  if (chunk < 0 || chunk >= shape_.chunks() || shape_.RankOf(chunk) != rank_) {
    return Status::InvalidArgument("pipeline chunks: chunk ", chunk,
                                   " is not on rank ", rank_, " (",
                                   ToString(shape_), ")");
  }
  return chunks_[static_cast<size_t>(chunk / shape_.ranks)].get();
}

Result<int> GraphChunkWork::TakeExecutor(Chunk &chunk) {
  if (!chunk.idle.empty()) {
    const int e = chunk.idle.back();
    chunk.idle.pop_back();
    return e;
  }
  EMBER_ASSIGN_OR_RETURN(auto executor, ops::GraphExecutor::Create(
                                            chunk.graph.get(), options_.seed));
  // Tensors share storage: every executor of the chunk reads one set of
  // parameters, which OptimizerStep updates in place.
  executor->parameters() = chunk.executors[0]->parameters();
  chunk.executors.push_back(std::move(executor));
  return static_cast<int>(chunk.executors.size()) - 1;
}

int64_t GraphChunkWork::OutputElements(int chunk) const {
  return output_elements_[static_cast<size_t>(chunk)] *
         options_.micro_batch_size;
}

Status GraphChunkWork::Forward(int micro_batch, int chunk,
                               const std::vector<float> &input,
                               std::vector<float> *output) {
  EMBER_ASSIGN_OR_RETURN(Chunk * c, Find(chunk));
  const ops::Graph &g = *c->graph;
  const int64_t batch = options_.micro_batch_size;
  std::vector<Tensor> inputs;
  if (chunk == 0) {
    if (micro_batches_ == nullptr ||
        micro_batch >= static_cast<int>(micro_batches_->size())) {
      return Status::FailedPrecondition(
          "pipeline chunks: no data for micro-batch ", micro_batch);
    }
    inputs = (*micro_batches_)[static_cast<size_t>(micro_batch)].inputs;
  } else {
    const int64_t want = ElementsOf(g, g.inputs()) * batch;
    if (static_cast<int64_t>(input.size()) != want) {
      return Status::InvalidArgument("pipeline chunk ", chunk, ": input of ",
                                     input.size(), " floats, expected ", want);
    }
    // The message holds the inputs one after another, each [B, elements].
    size_t offset = 0;
    for (int v : g.inputs()) {
      const int64_t e = g.values()[v].elements();
      std::vector<float> part(
          input.begin() + static_cast<std::ptrdiff_t>(offset),
          input.begin() + static_cast<std::ptrdiff_t>(offset + e * batch));
      inputs.push_back(Tensor::FromVector(part, {batch, e}));
      offset += static_cast<size_t>(e * batch);
    }
  }
  EMBER_ASSIGN_OR_RETURN(const int e, TakeExecutor(*c));
  c->in_flight[micro_batch] = e;
  c->inputs[micro_batch] = std::move(inputs);
  ops::GraphExecutor &executor = *c->executors[static_cast<size_t>(e)];
  EMBER_RETURN_IF_ERROR(executor.Forward(c->inputs[micro_batch]));
  output->clear();
  if (chunk + 1 == shape_.chunks())
    return Status::OK(); // The loss waits for the backward.
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const Tensor &out = executor.output(static_cast<int>(i));
    output->insert(output->end(), out.data<float>(),
                   out.data<float>() + out.numel());
  }
  return Status::OK();
}

Status GraphChunkWork::Backward(int micro_batch, int chunk,
                                const std::vector<float> &output_grad,
                                std::vector<float> *input_grad) {
  EMBER_ASSIGN_OR_RETURN(Chunk * c, Find(chunk));
  const auto it = c->in_flight.find(micro_batch);
  if (it == c->in_flight.end()) {
    return Status::FailedPrecondition("pipeline chunk ", chunk,
                                      ": backward of micro-batch ", micro_batch,
                                      " before its forward");
  }
  ops::GraphExecutor &executor = *c->executors[static_cast<size_t>(it->second)];
  const ops::Graph &g = *c->graph;
  const int64_t batch = options_.micro_batch_size;
  std::vector<Tensor> output_grads;
  if (chunk + 1 == shape_.chunks()) {
    const Tensor &logits = executor.output(0);
    Tensor dlogits = Tensor::Empty(logits.shape());
    const Tensor &labels =
        (*micro_batches_)[static_cast<size_t>(micro_batch)].labels;
    const int64_t mean_over =
        options_.loss_mean_over > 0 ? options_.loss_mean_over : batch;
    EMBER_ASSIGN_OR_RETURN(
        const double loss,
        ops::SigmoidCrossEntropyWithLogits(
            logits, labels.Reshape(logits.shape()), &dlogits, mean_over));
    running_loss_ += loss;
    output_grads.push_back(dlogits);
  } else {
    if (static_cast<int64_t>(output_grad.size()) != OutputElements(chunk)) {
      return Status::InvalidArgument(
          "pipeline chunk ", chunk, ": output gradient of ", output_grad.size(),
          " floats, expected ", OutputElements(chunk));
    }
    size_t offset = 0;
    for (int v : g.outputs()) {
      const int64_t e = g.values()[v].elements();
      std::vector<float> part(
          output_grad.begin() + static_cast<std::ptrdiff_t>(offset),
          output_grad.begin() +
              static_cast<std::ptrdiff_t>(offset + e * batch));
      output_grads.push_back(Tensor::FromVector(part, {batch, e}));
      offset += static_cast<size_t>(e * batch);
    }
  }
  std::vector<Tensor> grads;
  std::vector<Tensor *> grad_ptrs;
  if (chunk > 0) {
    for (int v : g.inputs())
      grads.push_back(Tensor::Empty({batch, g.values()[v].elements()}));
    for (Tensor &t : grads)
      grad_ptrs.push_back(&t);
  }
  EMBER_RETURN_IF_ERROR(executor.Backward(output_grads, grad_ptrs));
  // Summed in the order the backwards run: micro-batch order in every
  // built-in schedule, as in the unsplit model's gradient accumulation.
  for (size_t i = 0; i < c->grad_sums.size(); ++i) {
    float *sum = c->grad_sums[i].data<float>();
    const float *g_i = executor.gradients()[i].data<float>();
    for (int64_t k = 0; k < c->grad_sums[i].numel(); ++k)
      sum[k] += g_i[k];
  }
  input_grad->clear();
  for (const Tensor &t : grads) {
    input_grad->insert(input_grad->end(), t.data<float>(),
                       t.data<float>() + t.numel());
  }
  c->idle.push_back(it->second);
  c->in_flight.erase(it);
  c->inputs.erase(micro_batch);
  return Status::OK();
}

Status GraphChunkWork::OptimizerStep() {
  ++step_;
  for (const std::unique_ptr<Chunk> &c : chunks_) {
    std::vector<Tensor> &params = c->executors[0]->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      EMBER_RETURN_IF_ERROR(ops::DenseOptimizerStep(options_.optimizer, step_,
                                                    c->grad_sums[i], &params[i],
                                                    &c->slots[i]));
      std::memset(c->grad_sums[i].data<float>(), 0, c->grad_sums[i].nbytes());
    }
  }
  step_loss_ = running_loss_;
  running_loss_ = 0;
  return Status::OK();
}

std::vector<std::pair<std::string, Tensor>> GraphChunkWork::parameters() const {
  std::vector<std::pair<std::string, Tensor>> named;
  for (const std::unique_ptr<Chunk> &c : chunks_) {
    const std::vector<int> &ids = c->graph->parameters();
    for (size_t i = 0; i < ids.size(); ++i) {
      named.emplace_back(c->graph->values()[ids[i]].name,
                         c->executors[0]->parameters()[i]);
    }
  }
  return named;
}

} // namespace ember::pipeline
