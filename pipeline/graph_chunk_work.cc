#include "pipeline/graph_chunk_work.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "core/tensor_copy.h"
#include "ops/dense_ops.h"
#include "ops/dense_ops_cuda.h"

namespace ember::pipeline {
namespace {

// Per value id: the chunk that makes it (-1 for graph inputs and
// parameters), and the last chunk that reads it (-1: none).
struct ValueSpan {
  std::vector<int> made;
  std::vector<int> last_reader;
};

ValueSpan Spans(const ops::Graph& graph, const scheduler::PipelinePartition& partition) {
  ValueSpan span;
  span.made.assign(graph.values().size(), -1);
  span.last_reader.assign(graph.values().size(), -1);
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    const int chunk = partition.ChunkOf(static_cast<int>(n));
    for (int v : graph.nodes()[n].inputs) {
      span.last_reader[v] = std::max(span.last_reader[v], chunk);
    }
    for (int v : graph.nodes()[n].outputs) span.made[v] = chunk;
  }
  return span;
}

// The value ids the message into chunk c carries (see GraphChunk).
std::vector<int> CarriedInto(const ops::Graph& graph, const ValueSpan& span, int c) {
  if (c == 0) return graph.inputs();
  std::vector<int> carried;
  for (size_t v = 0; v < graph.values().size(); ++v) {
    const ops::GraphValue& value = graph.values()[v];
    if (value.kind == ops::ValueKind::kParameter) continue;
    if (span.made[v] < c && span.last_reader[v] >= c) carried.push_back(static_cast<int>(v));
  }
  return carried;
}

// Chunk c's graph: the carried values as its inputs, the nodes of `range`,
// and as its outputs the values it carries on (or the whole graph's, for the
// last chunk). A value that only passes through leaves by a one-input concat
// (a copy) after the chunk's nodes, so that its backward runs first: the
// value's gradient is then the later chunks' sum with this chunk's
// contributions added after it, in the order the unsplit graph adds them.
Status CutChunk(const ops::Graph& graph, const scheduler::PipelineChunk& range, bool last,
                GraphChunk* chunk) {
  auto sub = std::make_unique<ops::Graph>(&graph.registry());
  std::vector<int> id(graph.values().size(), -1);  // Whole graph's value id -> the chunk's.
  for (int v : chunk->carried_in) {
    EMBER_ASSIGN_OR_RETURN(id[v], sub->AddInput(graph.values()[v].name, graph.values()[v].shape));
  }
  for (int n = range.first_node; n < range.end_node; ++n) {
    const ops::GraphNode& node = graph.nodes()[n];
    std::vector<int> node_inputs;
    for (int v : node.inputs) {
      const ops::GraphValue& value = graph.values()[v];
      if (value.kind == ops::ValueKind::kParameter && id[v] < 0) {
        EMBER_ASSIGN_OR_RETURN(
            id[v], sub->AddParameter(value.name, value.shape, value.initializer, value.fan_in));
      }
      node_inputs.push_back(id[v]);
    }
    EMBER_ASSIGN_OR_RETURN(const std::vector<int> made,
                           sub->AddNode(node.name, node.op, node_inputs, node.attrs));
    for (size_t i = 0; i < made.size(); ++i) id[node.outputs[i]] = made[i];
  }
  for (int v : last ? graph.outputs() : chunk->carried_out) {
    const ops::GraphValue& value = graph.values()[v];
    const bool made = value.kind == ops::ValueKind::kActivation &&
                      value.producer >= range.first_node && value.producer < range.end_node;
    int out = id[v];
    if (!made) {
      EMBER_ASSIGN_OR_RETURN(const std::vector<int> copy,
                             sub->AddNode("pass." + value.name, "concat", {id[v]}, {}));
      out = copy[0];
    }
    EMBER_RETURN_IF_ERROR(sub->MarkOutput(out));
  }
  chunk->graph = std::move(sub);
  return Status::OK();
}

int64_t ElementsOf(const std::vector<int64_t>& elements, const std::vector<int>& values) {
  int64_t n = 0;
  for (int v : values) n += elements[static_cast<size_t>(v)];
  return n;
}

// Appends `t`'s floats to `message`.
void Append(const Tensor& t, std::vector<float>* message) {
  message->insert(message->end(), t.data<float>(), t.data<float>() + t.numel());
}

}  // namespace

Result<std::vector<GraphChunk>> CutGraph(const ops::Graph& graph,
                                         const scheduler::PipelinePartition& partition) {
  const int n = static_cast<int>(graph.nodes().size());
  int next = 0;
  for (const scheduler::PipelineChunk& chunk : partition.chunks) {
    if (chunk.first_node != next || chunk.end_node <= chunk.first_node) {
      return Status::InvalidArgument("pipeline chunks: chunk of nodes [", chunk.first_node, ", ",
                                     chunk.end_node, ") does not follow node ", next);
    }
    next = chunk.end_node;
  }
  if (next != n || partition.chunks.empty()) {
    return Status::InvalidArgument("pipeline chunks: the partition covers ", next, " of ", n,
                                   " nodes");
  }
  const int chunks = static_cast<int>(partition.chunks.size());
  for (int v : graph.outputs()) {
    const int made = partition.ChunkOf(graph.values()[v].producer);
    if (made != chunks - 1) {
      return Status::Unimplemented("pipeline chunks: graph output \"", graph.values()[v].name,
                                   "\" is made by chunk ", made, ", not the last chunk ",
                                   chunks - 1);
    }
  }
  const ValueSpan span = Spans(graph, partition);
  std::vector<GraphChunk> cut(static_cast<size_t>(chunks));
  for (int c = 0; c < chunks; ++c) cut[c].carried_in = CarriedInto(graph, span, c);
  for (int c = 0; c + 1 < chunks; ++c) cut[c].carried_out = cut[c + 1].carried_in;
  for (int c = 0; c < chunks; ++c) {
    const Status status = CutChunk(graph, partition.chunks[c], c + 1 == chunks, &cut[c]);
    if (!status.ok()) return status.WithContext(internal::StrCat("pipeline chunk ", c));
  }
  return cut;
}

struct GraphChunkWork::Chunk {
  int index = 0;  // Global.
  GraphChunk cut;
  // executors[0] owns the parameters; the others share its tensors, one per
  // micro-batch in flight at once.
  std::vector<std::unique_ptr<ops::GraphExecutor>> executors;
  std::vector<int> idle;
  std::map<int, int> in_flight;  // Micro-batch -> executor.
  // Micro-batch -> executor, from BackwardInput to BackwardWeight.
  std::map<int, int> weights_pending;
  // Micro-batch -> the carried values ([B, elements] each), until backward
  // (until its weight gradients, when split).
  std::map<int, std::vector<Tensor>> carried;
  std::vector<Tensor> grad_sums;               // Per parameter.
  std::vector<ops::DenseOptimizerSlot> slots;  // Per parameter.
};

GraphChunkWork::GraphChunkWork(const GraphChunkWorkOptions& options, const ScheduleShape& shape,
                               int rank)
    : options_(options), shape_(shape), rank_(rank) {}

GraphChunkWork::~GraphChunkWork() = default;

Result<std::unique_ptr<GraphChunkWork>> GraphChunkWork::Create(
    const ops::Graph& graph, const scheduler::PipelinePartition& partition,
    const ScheduleShape& shape, int rank, const GraphChunkWorkOptions& options) {
  EMBER_RETURN_IF_ERROR(ValidateShape(shape));
  if (static_cast<int>(partition.chunks.size()) != shape.chunks()) {
    return Status::InvalidArgument("pipeline chunks: a partition of ", partition.chunks.size(),
                                   " chunks for ", shape.chunks(), " (", ToString(shape), ")");
  }
  if (rank < 0 || rank >= shape.ranks) {
    return Status::InvalidArgument("pipeline chunks: rank ", rank, " of ", ToString(shape));
  }
  if (options.micro_batch_size < 1 || options.loss_mean_over < 0) {
    return Status::InvalidArgument("pipeline chunks: micro_batch_size ", options.micro_batch_size,
                                   ", loss_mean_over ", options.loss_mean_over);
  }
  for (const ops::GraphNode& node : graph.nodes()) {
    EMBER_ASSIGN_OR_RETURN(const ops::OpDef* def, graph.registry().FindOp(node.op));
    if (def->rows_grouped) {
      return Status::Unimplemented("pipeline chunks: node \"", node.name, "\" (", node.op,
                                   ") routes a batch's rows as one group; micro-batches would "
                                   "change its groups, so the model cannot be pipelined yet");
    }
  }
  EMBER_ASSIGN_OR_RETURN(std::vector<GraphChunk> cut, CutGraph(graph, partition));
  std::unique_ptr<GraphChunkWork> work(new GraphChunkWork(options, shape, rank));
  if (options.device.is_cuda()) {
    EMBER_ASSIGN_OR_RETURN(work->stream_, CudaStream::Create(options.device.index));
  }
  for (const ops::GraphValue& value : graph.values()) {
    work->value_elements_.push_back(value.elements());
  }
  // Every chunk's: a rank receives the outputs of chunks it does not hold.
  for (const GraphChunk& chunk : cut) {
    work->carried_out_elements_.push_back(ElementsOf(work->value_elements_, chunk.carried_out));
  }
  for (int c = rank; c < shape.chunks(); c += shape.ranks) {
    auto chunk = std::make_unique<Chunk>();
    chunk->index = c;
    chunk->cut = std::move(cut[static_cast<size_t>(c)]);
    EMBER_ASSIGN_OR_RETURN(auto executor,
                           ops::GraphExecutor::Create(chunk->cut.graph.get(), options.seed,
                                                      options.device, work->stream_.get()));
    for (const Tensor& p : executor->parameters()) {
      EMBER_ASSIGN_OR_RETURN(Tensor sum, work->DeviceZeros(p.shape()));
      chunk->grad_sums.push_back(std::move(sum));
      if (options.device.is_cpu()) {
        chunk->slots.push_back(ops::NewDenseOptimizerSlot(options.optimizer, p));
      } else {
        EMBER_ASSIGN_OR_RETURN(chunk->slots.emplace_back(),
                               ops::NewDenseOptimizerSlotCuda(options.optimizer, p,
                                                              *work->stream_));
      }
    }
    chunk->executors.push_back(std::move(executor));
    chunk->idle.push_back(0);
    work->chunks_.push_back(std::move(chunk));
  }
  return work;
}

Result<GraphChunkWork::Chunk*> GraphChunkWork::Find(int chunk) {
  if (chunk < 0 || chunk >= shape_.chunks() || shape_.RankOf(chunk) != rank_) {
    return Status::InvalidArgument("pipeline chunks: chunk ", chunk, " is not on rank ", rank_,
                                   " (", ToString(shape_), ")");
  }
  return chunks_[static_cast<size_t>(chunk / shape_.ranks)].get();
}

Result<int> GraphChunkWork::TakeExecutor(Chunk& chunk) {
  if (!chunk.idle.empty()) {
    const int e = chunk.idle.back();
    chunk.idle.pop_back();
    return e;
  }
  EMBER_ASSIGN_OR_RETURN(auto executor,
                         ops::GraphExecutor::Create(chunk.cut.graph.get(), options_.seed,
                                                    options_.device, stream_.get()));
  // Tensors share storage: every executor of the chunk reads one set of
  // parameters, which OptimizerStep updates in place.
  executor->parameters() = chunk.executors[0]->parameters();
  chunk.executors.push_back(std::move(executor));
  return static_cast<int>(chunk.executors.size()) - 1;
}

int64_t GraphChunkWork::MicroBatchSize(int micro_batch) const {
  if (micro_batch >= 0 && micro_batch < static_cast<int>(sizes_.size())) {
    return sizes_[static_cast<size_t>(micro_batch)];
  }
  return options_.micro_batch_size;
}

Result<Tensor> GraphChunkWork::ToDevice(const Tensor& host) const {
  if (options_.device.is_cpu()) return host;
  EMBER_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(host.shape(), DType::kF32, options_.device,
                                                    stream_->allocator()));
  EMBER_RETURN_IF_ERROR(CopyTensor(host, &t, stream_.get()));
  return t;
}

Result<Tensor> GraphChunkWork::ToHost(const Tensor& tensor) const {
  if (options_.device.is_cpu()) return tensor;
  Tensor host = Tensor::Empty(tensor.shape());
  EMBER_RETURN_IF_ERROR(CopyTensor(tensor, &host, stream_.get()));
  EMBER_RETURN_IF_ERROR(stream_->Synchronize());
  return host;
}

Result<Tensor> GraphChunkWork::DeviceZeros(const std::vector<int64_t>& shape) const {
  if (options_.device.is_cpu()) return Tensor::Zeros(shape);
  EMBER_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(shape, DType::kF32, options_.device,
                                                    stream_->allocator()));
  EMBER_RETURN_IF_ERROR(ZeroTensor(&t, stream_.get()));
  return t;
}

int64_t GraphChunkWork::OutputElements(int micro_batch, int chunk) const {
  return carried_out_elements_[static_cast<size_t>(chunk)] * MicroBatchSize(micro_batch);
}

Result<std::vector<Tensor>> GraphChunkWork::Split(const std::vector<float>& message,
                                                  const std::vector<int>& values, int64_t batch,
                                                  const std::string& what) const {
  const int64_t want = ElementsOf(value_elements_, values) * batch;
  if (static_cast<int64_t>(message.size()) != want) {
    return Status::InvalidArgument("pipeline ", what, " of ", message.size(),
                                   " floats, expected ", want);
  }
  std::vector<Tensor> parts;
  const float* at = message.data();
  for (int v : values) {
    const int64_t e = value_elements_[static_cast<size_t>(v)];
    Tensor t = Tensor::Empty({batch, e});
    std::memcpy(t.data<float>(), at, static_cast<size_t>(e * batch) * sizeof(float));
    at += e * batch;
    parts.push_back(std::move(t));
  }
  return parts;
}

Status GraphChunkWork::Forward(int micro_batch, int chunk, const std::vector<float>& input,
                               std::vector<float>* output) {
  EMBER_ASSIGN_OR_RETURN(Chunk * c, Find(chunk));
  const GraphChunk& cut = c->cut;
  const int64_t batch = MicroBatchSize(micro_batch);
  std::vector<Tensor> carried;
  if (chunk == 0) {
    if (micro_batches_ == nullptr || micro_batch >= static_cast<int>(micro_batches_->size())) {
      return Status::FailedPrecondition("pipeline chunks: no data for micro-batch ", micro_batch);
    }
    carried = (*micro_batches_)[static_cast<size_t>(micro_batch)].inputs;
  } else {
    EMBER_ASSIGN_OR_RETURN(carried, Split(input, cut.carried_in, batch,
                                          internal::StrCat("chunk ", chunk, ": input")));
  }
  for (Tensor& t : carried) {
    EMBER_ASSIGN_OR_RETURN(t, ToDevice(t));
  }
  EMBER_ASSIGN_OR_RETURN(const int e, TakeExecutor(*c));
  c->in_flight[micro_batch] = e;
  ops::GraphExecutor& executor = *c->executors[static_cast<size_t>(e)];
  EMBER_RETURN_IF_ERROR(executor.Forward(carried));
  output->clear();
  if (chunk + 1 < shape_.chunks()) {
    for (size_t i = 0; i < cut.carried_out.size(); ++i) {
      EMBER_ASSIGN_OR_RETURN(const Tensor out, ToHost(executor.output(static_cast<int>(i))));
      Append(out, output);
    }
  }
  c->carried[micro_batch] = std::move(carried);  // The executor reads them until backward.
  return Status::OK();
}

Status GraphChunkWork::Backward(int micro_batch, int chunk, const std::vector<float>& output_grad,
                                std::vector<float>* input_grad) {
  return RunBackward(micro_batch, chunk, output_grad, input_grad, false);
}

Status GraphChunkWork::BackwardInput(int micro_batch, int chunk,
                                     const std::vector<float>& output_grad,
                                     std::vector<float>* input_grad) {
  return RunBackward(micro_batch, chunk, output_grad, input_grad, true);
}

Status GraphChunkWork::AddToSums(Chunk& c, const ops::GraphExecutor& executor, Half half) {
  for (size_t i = 0; i < c.grad_sums.size(); ++i) {
    const bool deferred = executor.parameter_deferred(static_cast<int>(i));
    if ((half == Half::kFirst && deferred) || (half == Half::kSecond && !deferred)) continue;
    Tensor& sum = c.grad_sums[i];
    const Tensor& g = executor.gradients()[i];
    if (!options_.device.is_cpu()) {
      EMBER_RETURN_IF_ERROR(ops::AddCuda(sum, g, &sum, *stream_));
      continue;
    }
    float* s = sum.data<float>();
    const float* gi = g.data<float>();
    for (int64_t k = 0; k < sum.numel(); ++k) s[k] += gi[k];
  }
  return Status::OK();
}

Status GraphChunkWork::BackwardWeight(int micro_batch, int chunk) {
  EMBER_ASSIGN_OR_RETURN(Chunk * c, Find(chunk));
  const auto it = c->weights_pending.find(micro_batch);
  if (it == c->weights_pending.end()) {
    return Status::FailedPrecondition("pipeline chunk ", chunk, ": weight gradients of micro-batch ",
                                      micro_batch, " before its input gradient");
  }
  ops::GraphExecutor& executor = *c->executors[static_cast<size_t>(it->second)];
  EMBER_RETURN_IF_ERROR(executor.BackwardWeights());
  // Summed in the order the weight gradients run: micro-batch order in
  // zb-h1, as the unsplit backwards' sums.
  EMBER_RETURN_IF_ERROR(AddToSums(*c, executor, Half::kSecond));
  c->idle.push_back(it->second);
  c->weights_pending.erase(it);
  c->carried.erase(micro_batch);
  return Status::OK();
}

Status GraphChunkWork::RunBackward(int micro_batch, int chunk,
                                   const std::vector<float>& output_grad,
                                   std::vector<float>* input_grad, bool split) {
  EMBER_ASSIGN_OR_RETURN(Chunk * c, Find(chunk));
  const auto it = c->in_flight.find(micro_batch);
  if (it == c->in_flight.end()) {
    return Status::FailedPrecondition("pipeline chunk ", chunk, ": backward of micro-batch ",
                                      micro_batch, " before its forward");
  }
  ops::GraphExecutor& executor = *c->executors[static_cast<size_t>(it->second)];
  const GraphChunk& cut = c->cut;
  const int64_t batch = MicroBatchSize(micro_batch);
  std::vector<Tensor> output_grads;
  if (chunk + 1 == shape_.chunks()) {
    if (micro_batches_ == nullptr || micro_batch >= static_cast<int>(micro_batches_->size())) {
      return Status::FailedPrecondition("pipeline chunks: no labels for micro-batch ",
                                        micro_batch);
    }
    EMBER_ASSIGN_OR_RETURN(const Tensor logits, ToHost(executor.output(0)));
    Tensor dlogits = Tensor::Empty(logits.shape());
    const Tensor& labels = (*micro_batches_)[static_cast<size_t>(micro_batch)].labels;
    if (labels.numel() != logits.numel()) {
      return Status::InvalidArgument("pipeline chunk ", chunk, ": ", labels.numel(),
                                     " labels for ", logits.numel(), " logits");
    }
    EMBER_ASSIGN_OR_RETURN(const double loss, ops::SigmoidCrossEntropyWithLogits(
                                                  logits, labels.Reshape(logits.shape()),
                                                  &dlogits, options_.loss_mean_over));
    running_loss_ += loss;
    logits_[micro_batch] = options_.device.is_cpu() ? logits.Clone() : logits;
    EMBER_ASSIGN_OR_RETURN(dlogits, ToDevice(dlogits));
    output_grads.push_back(dlogits);
  } else {
    EMBER_ASSIGN_OR_RETURN(output_grads,
                           Split(output_grad, cut.carried_out, batch,
                                 internal::StrCat("chunk ", chunk, ": output gradient")));
    for (Tensor& t : output_grads) {
      EMBER_ASSIGN_OR_RETURN(t, ToDevice(t));
    }
  }
  // The gradient of every carried value (chunk 0: of the graph's inputs).
  std::vector<Tensor> in_grads;
  for (int v : cut.carried_in) {
    EMBER_ASSIGN_OR_RETURN(in_grads.emplace_back(),
                           DeviceZeros({batch, value_elements_[static_cast<size_t>(v)]}));
  }
  std::vector<Tensor*> grad_ptrs;
  for (Tensor& t : in_grads) grad_ptrs.push_back(&t);
  EMBER_RETURN_IF_ERROR(split ? executor.BackwardInputs(output_grads, grad_ptrs)
                              : executor.Backward(output_grads, grad_ptrs));
  // Summed in the order the backwards run: micro-batch order in every
  // built-in schedule, as in the unsplit model's gradient accumulation.
  EMBER_RETURN_IF_ERROR(AddToSums(*c, executor, split ? Half::kFirst : Half::kBoth));
  for (Tensor& t : in_grads) {
    EMBER_ASSIGN_OR_RETURN(t, ToHost(t));
  }
  input_grad->clear();
  if (chunk > 0) {
    for (const Tensor& t : in_grads) Append(t, input_grad);
  }
  if (chunk == 0) input_grads_[micro_batch] = std::move(in_grads);
  if (split) {
    c->weights_pending[micro_batch] = it->second;  // Its carried values stay too.
  } else {
    c->idle.push_back(it->second);
    c->carried.erase(micro_batch);
  }
  c->in_flight.erase(it);
  return Status::OK();
}

Status GraphChunkWork::ReduceGradients() {
  if (!options_.device.is_cpu()) {
    for (const std::unique_ptr<Chunk>& c : chunks_) {
      for (Tensor& sum : c->grad_sums) {
        EMBER_RETURN_IF_ERROR(
            reducer_->AllReduce(sum, sum).WithContext("all-reducing the chunks' gradients"));
      }
    }
    return Status::OK();
  }
  size_t total = 0;
  for (const std::unique_ptr<Chunk>& c : chunks_) {
    for (const Tensor& sum : c->grad_sums) total += static_cast<size_t>(sum.numel());
  }
  packed_gradients_.resize(total);
  size_t at = 0;
  for (const std::unique_ptr<Chunk>& c : chunks_) {
    for (const Tensor& sum : c->grad_sums) {
      std::memcpy(packed_gradients_.data() + at, sum.data<float>(), sum.nbytes());
      at += static_cast<size_t>(sum.numel());
    }
  }
  EMBER_RETURN_IF_ERROR(reducer_->AllReduce(packed_gradients_, packed_gradients_)
                            .WithContext("all-reducing the chunks' gradients"));
  at = 0;
  for (const std::unique_ptr<Chunk>& c : chunks_) {
    for (Tensor& sum : c->grad_sums) {
      std::memcpy(sum.data<float>(), packed_gradients_.data() + at, sum.nbytes());
      at += static_cast<size_t>(sum.numel());
    }
  }
  return Status::OK();
}

Status GraphChunkWork::OptimizerStep() {
  for (const std::unique_ptr<Chunk>& c : chunks_) {
    if (!c->weights_pending.empty()) {
      return Status::FailedPrecondition(
          "pipeline chunk ", c->index, ": optimizer step before the weight gradients of micro-batch ",
          c->weights_pending.begin()->first);
    }
  }
  if (reducer_ != nullptr) EMBER_RETURN_IF_ERROR(ReduceGradients());
  ++step_;
  for (const std::unique_ptr<Chunk>& c : chunks_) {
    std::vector<Tensor>& params = c->executors[0]->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      if (options_.device.is_cpu()) {
        EMBER_RETURN_IF_ERROR(ops::DenseOptimizerStep(options_.optimizer, step_,
                                                      c->grad_sums[i], &params[i], &c->slots[i]));
        std::memset(c->grad_sums[i].data<float>(), 0, c->grad_sums[i].nbytes());
        continue;
      }
      EMBER_RETURN_IF_ERROR(ops::DenseOptimizerStepCuda(options_.optimizer, step_,
                                                        c->grad_sums[i], &params[i],
                                                        &c->slots[i], *stream_));
      EMBER_RETURN_IF_ERROR(ZeroTensor(&c->grad_sums[i], stream_.get()));
    }
  }
  step_loss_ = running_loss_;
  running_loss_ = 0;
  return Status::OK();
}

Result<std::vector<ChunkParameter>> GraphChunkWork::ParametersToHost() {
  std::vector<ChunkParameter> host;
  for (const std::unique_ptr<Chunk>& c : chunks_) {
    const ops::Graph& g = *c->cut.graph;
    const std::vector<int>& ids = g.parameters();
    for (size_t i = 0; i < ids.size(); ++i) {
      ChunkParameter p;
      p.name = g.values()[ids[i]].name;
      EMBER_ASSIGN_OR_RETURN(p.value, ToHost(c->executors[0]->parameters()[i]));
      const ops::DenseOptimizerSlot& slot = c->slots[i];
      if (slot.first_moment.defined()) {
        EMBER_ASSIGN_OR_RETURN(p.slot.first_moment, ToHost(slot.first_moment));
      }
      if (slot.second_moment.defined()) {
        EMBER_ASSIGN_OR_RETURN(p.slot.second_moment, ToHost(slot.second_moment));
      }
      // On the CPU these share the chunk's storage: copies, as on a device.
      if (options_.device.is_cpu()) {
        p.value = p.value.Clone();
        if (p.slot.first_moment.defined()) p.slot.first_moment = p.slot.first_moment.Clone();
        if (p.slot.second_moment.defined()) p.slot.second_moment = p.slot.second_moment.Clone();
      }
      host.push_back(std::move(p));
    }
  }
  return host;
}

Status GraphChunkWork::ParametersFromHost(const std::vector<ChunkParameter>& parameters) {
  // Every tensor of the chunks, beside its host source, checked first.
  std::vector<std::pair<const Tensor*, Tensor*>> copies;
  size_t at = 0;
  for (const std::unique_ptr<Chunk>& c : chunks_) {
    const ops::Graph& g = *c->cut.graph;
    const std::vector<int>& ids = g.parameters();
    for (size_t i = 0; i < ids.size(); ++i, ++at) {
      const std::string& name = g.values()[ids[i]].name;
      if (at >= parameters.size() || parameters[at].name != name) {
        return Status::InvalidArgument("pipeline chunks: parameter ", at, " of rank ", rank_,
                                       " is \"", name, "\", given ",
                                       at < parameters.size() ? parameters[at].name : "none");
      }
      const ChunkParameter& from = parameters[at];
      ops::DenseOptimizerSlot& slot = c->slots[i];
      const std::array<std::pair<const Tensor*, Tensor*>, 3> pairs = {
          std::pair{&from.value, &c->executors[0]->parameters()[i]},
          std::pair{&from.slot.first_moment, &slot.first_moment},
          std::pair{&from.slot.second_moment, &slot.second_moment}};
      for (const auto& [src, dst] : pairs) {
        if (!dst->defined()) continue;
        if (!src->defined() || src->numel() != dst->numel()) {
          return Status::InvalidArgument("pipeline chunks: parameter \"", name, "\" of rank ",
                                         rank_, " takes ", dst->numel(), " floats a tensor");
        }
        copies.emplace_back(src, dst);
      }
    }
  }
  if (at != parameters.size()) {
    return Status::InvalidArgument("pipeline chunks: rank ", rank_, " holds ", at,
                                   " parameters, given ", parameters.size());
  }
  for (const auto& [src, dst] : copies) {
    EMBER_RETURN_IF_ERROR(CopyTensor(*src, dst, stream_.get()));
  }
  return stream_ ? stream_->Synchronize() : Status::OK();
}

Result<Tensor> GraphChunkWork::Logits(int micro_batch) const {
  const auto it = logits_.find(micro_batch);
  if (it == logits_.end()) {
    return Status::FailedPrecondition("pipeline chunks: no logits of micro-batch ", micro_batch,
                                      " on rank ", rank_);
  }
  return it->second;
}

Result<Tensor> GraphChunkWork::InputGradient(int micro_batch, int input) const {
  const auto it = input_grads_.find(micro_batch);
  if (it == input_grads_.end() || input < 0 || input >= static_cast<int>(it->second.size())) {
    return Status::FailedPrecondition("pipeline chunks: no gradient of input ", input,
                                      " of micro-batch ", micro_batch, " on rank ", rank_);
  }
  return it->second[static_cast<size_t>(input)];
}

}  // namespace ember::pipeline
