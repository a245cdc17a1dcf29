#include "ops/graph_executor.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/allocator.h"
#include "core/random.h"
#include "core/simd.h"
#include "core/tensor_copy.h"
#include "core/threads.h"
#include "ops/dense_ops_cuda.h"
#include "ops/internal/matmul.h"

namespace ember::ops {
namespace {

// Rows per shard at least (GraphExecutor::set_row_shards): below it a batch
// runs in fewer shards.
constexpr int64_t kMinShardRows = 64;

// The tensors a kernel sees when it runs on rows [begin, end) of the batch:
// views of the batched values at those rows, the tensors themselves for
// parameters and for a whole batch.
class RowViews {
 public:
  RowViews(const Graph& graph, int64_t begin, int64_t end, int64_t batch)
      : graph_(graph), begin_(begin), end_(end), whole_(begin == 0 && end == batch) {}
  // Before each node: room for the `count` views it takes, so that the
  // pointers given out stay valid.
  void Reserve(size_t count) {
    views_.clear();
    views_.reserve(count);
  }
  // `tensor` (of value `id`) or its view at the rows.
  template <typename T>
  T* operator()(T* tensor, int id) {
    if (whole_ || !graph_.values()[id].batched()) return tensor;
    views_.push_back(tensor->Slice(begin_, end_));
    return &views_.back();
  }

 private:
  const Graph& graph_;
  const int64_t begin_, end_;
  const bool whole_;
  std::vector<Tensor> views_;
};

std::vector<int64_t> Batched(int64_t batch, const std::vector<int64_t>& shape) {
  std::vector<int64_t> full = {batch};
  full.insert(full.end(), shape.begin(), shape.end());
  return full;
}

uint64_t NameHash(const std::string& name) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ULL;
  return h;
}

EMBER_MULTIVERSIONED
void AddTo(const float* __restrict from, int64_t n, float* __restrict to) {
  for (int64_t i = 0; i < n; ++i) to[i] += from[i];
}

// The initial value of parameter `v` on the host.
Tensor InitialValue(const GraphValue& v, uint64_t seed) {
  Tensor value = Tensor::Zeros(v.shape);
  if (v.initializer == Initializer::kHeUniform) {
    RandomStream random(seed, NameHash(v.name));
    const double bound = std::sqrt(6.0 / static_cast<double>(v.fan_in));
    float* w = value.data<float>();
    for (int64_t i = 0; i < value.numel(); ++i) {
      w[i] = static_cast<float>(random.Uniform(-bound, bound));
    }
  }
  return value;
}

}  // namespace

Result<std::unique_ptr<GraphExecutor>> GraphExecutor::Create(const Graph* graph, uint64_t seed,
                                                             const Device& device,
                                                             CudaStream* stream) {
  if (graph->outputs().empty()) return Status::InvalidArgument("the graph has no outputs");
  std::unique_ptr<CudaStream> owned_stream;
  if (device.is_cuda()) {
    // FailedPrecondition without CUDA or without that device.
    EMBER_RETURN_IF_ERROR(AllocatorFor(device).status());
    if (stream == nullptr) {
      EMBER_ASSIGN_OR_RETURN(owned_stream, CudaStream::Create(device.index));
      stream = owned_stream.get();
    } else if (stream->device() != device.index) {
      return Status::InvalidArgument("a graph executor on ", device.ToString(),
                                     " was given a stream of cuda:", stream->device());
    }
  } else {
    stream = nullptr;
  }
  std::vector<const KernelPair*> kernels;
  for (const GraphNode& node : graph->nodes()) {
    Result<const KernelPair*> kernel = graph->registry().FindKernel(node.op, device.type);
    if (!kernel.ok()) return kernel.status().WithContext("node \"" + node.name + "\"");
    kernels.push_back(*kernel);
  }
  std::unique_ptr<GraphExecutor> executor(
      new GraphExecutor(graph, std::move(kernels), device, stream, std::move(owned_stream)));
  executor->rows_independent_ = true;
  for (const GraphNode& node : graph->nodes()) {
    Result<const OpDef*> def = graph->registry().FindOp(node.op);
    executor->rows_independent_ = executor->rows_independent_ && def.ok() &&
                                  ((*def)->rows_independent || (*def)->rows_grouped);
    executor->rows_grouped_ = executor->rows_grouped_ || (def.ok() && (*def)->rows_grouped);
  }
  EMBER_RETURN_IF_ERROR(executor->InitializeParameters(seed));
  executor->FindSplitNodes();
  return executor;
}

void GraphExecutor::FindSplitNodes() {
  const std::vector<GraphNode>& nodes = graph_->nodes();
  std::vector<int> readers(graph_->values().size(), 0);
  for (const GraphNode& node : nodes) {
    for (int in : node.inputs) readers[in] += parameter_slot_[in] >= 0;
  }
  node_splits_.assign(nodes.size(), 0);
  deferred_.assign(parameters_.size(), 0);
  first_reader_.assign(parameters_.size(), -1);
  for (size_t n = nodes.size(); n-- > 0;) {
    for (int in : nodes[n].inputs) {
      if (parameter_slot_[in] >= 0) first_reader_[parameter_slot_[in]] = static_cast<int>(n);
    }
  }
  for (size_t n = 0; n < nodes.size(); ++n) {
    bool splits = kernels_[n]->splits_parameter_gradients;
    bool any = false;
    for (int in : nodes[n].inputs) {
      if (parameter_slot_[in] < 0) continue;
      any = true;
      splits = splits && readers[in] == 1;  // Read once, by this node alone.
    }
    if (!splits || !any) continue;
    node_splits_[n] = 1;
    for (int in : nodes[n].inputs) {
      if (parameter_slot_[in] >= 0) deferred_[parameter_slot_[in]] = 1;
    }
  }
}

GraphExecutor::GraphExecutor(const Graph* graph, std::vector<const KernelPair*> kernels,
                             const Device& device, CudaStream* stream,
                             std::unique_ptr<CudaStream> owned_stream)
    : graph_(graph),
      kernels_(std::move(kernels)),
      device_(device),
      owned_stream_(std::move(owned_stream)),
      stream_(stream),
      parameter_slot_(graph->values().size(), -1),
      values_(graph->values().size()),
      grads_(graph->values().size()),
      scratch_(graph->values().size()),
      node_steps_(graph->nodes().size(), 0) {}

Status GraphExecutor::set_precision(ComputePrecision precision) {
  if (device_.is_cpu() && precision == ComputePrecision::kF16) {
    return Status::InvalidArgument(
        "f16 arithmetic needs a CUDA device; the CPU kernels compute in f32 or bf16");
  }
  if (device_.is_cpu() && precision == ComputePrecision::kBf16 && !internal::CpuHasBf16()) {
    return Status::InvalidArgument(
        "bf16 arithmetic on the CPU needs AVX512-BF16 or AMX, which this CPU lacks (or "
        "ONEDNN_MAX_CPU_ISA forbids); use f32");
  }
  precision_ = precision;
  return Status::OK();
}

Status GraphExecutor::InitializeParameters(uint64_t seed) {
  std::vector<Tensor> initial;  // Host values, alive until the copies are done.
  for (int id : graph_->parameters()) {
    const GraphValue& v = graph_->values()[id];
    parameter_slot_[id] = static_cast<int>(parameters_.size());
    initial.push_back(InitialValue(v, seed));
    if (device_.is_cpu()) {
      parameters_.push_back(initial.back());
      gradients_.push_back(Tensor::Zeros(v.shape));
      continue;
    }
    EMBER_ASSIGN_OR_RETURN(Tensor value, NewTensor(v.shape));
    EMBER_RETURN_IF_ERROR(CopyTensor(initial.back(), &value, stream_));
    EMBER_ASSIGN_OR_RETURN(Tensor grad, NewTensor(v.shape));
    EMBER_RETURN_IF_ERROR(ZeroTensor(&grad, stream_));
    parameters_.push_back(value);
    gradients_.push_back(grad);
  }
  if (stream_ == nullptr) return Status::OK();
  return stream_->Synchronize().WithContext("initialising the parameters on " + device_.ToString());
}

Result<Tensor> GraphExecutor::NewTensor(std::vector<int64_t> shape) const {
  if (device_.is_cpu()) return Tensor::Empty(std::move(shape));
  return Tensor::Allocate(std::move(shape), DType::kF32, device_);
}

Status GraphExecutor::Accumulate(const Tensor& from, Tensor* to) {
  if (device_.is_cuda()) return AddCuda(*to, from, to, *stream_);
  // numel() walks the shape: taken once, not per element. A gradient summed
  // from two readers is often a whole batch's (DeepFM's embeddings, DCN-v2's
  // x0): added in parallel chunks, elementwise, so the same for any split.
  const float* src = from.data<float>();
  float* dst = to->data<float>();
  ParallelFor(0, to->numel(), int64_t{1} << 14,
              [&](int64_t begin, int64_t end) { AddTo(src + begin, end - begin, dst + begin); });
  return Status::OK();
}

Status GraphExecutor::set_row_shards(int shards) {
  if (shards < 0) return Status::InvalidArgument("row shards must be >= 0, got ", shards);
  row_shards_ = shards;
  return Status::OK();
}

int GraphExecutor::ShardsFor(int64_t batch) const {
  if (!device_.is_cpu() || !rows_independent_) return 0;
  const int shards = row_shards_ == 0 ? CurrentArenaThreads() : row_shards_;
  // One thread (row_shards 0) runs its one range with the ranges' kernels, so
  // that its rows get the bits each range of a run with more threads gets
  // (what a rank of a data-parallel job computes: pipeline/training_step.h).
  if (shards < 2) return row_shards_ == 0 ? 1 : 0;
  if (experts_ != nullptr) return 0;  // One thread exchanges with the other ranks.
  // Grouped ops compute over their range (the MoE routing's capacity): the
  // ranges, and so the results, must not depend on the batch's size.
  if (rows_grouped_) return static_cast<int>(std::clamp<int64_t>(batch, 1, shards));
  return static_cast<int>(std::clamp<int64_t>(batch / kMinShardRows, 1, shards));
}

Status GraphExecutor::RunShards(int shards,
                                const std::function<Status(int, int64_t, int64_t)>& fn) {
  while (static_cast<int>(shard_arenas_.size()) < shards) {
    shard_arenas_.push_back(std::make_unique<ThreadArena>(1));
  }
  std::vector<Status> statuses(shards);
  const int64_t batch = batch_;
  ParallelFor(0, shards, 1, [&](int64_t first, int64_t last) {
    const int omp_threads = OpenMpThreads();
    SetOpenMpThreads(1);
    for (int64_t s = first; s < last; ++s) {
      const int64_t begin = batch * s / shards, end = batch * (s + 1) / shards;
      shard_arenas_[s]->Execute([&] { statuses[s] = fn(static_cast<int>(s), begin, end); });
    }
    SetOpenMpThreads(omp_threads);
  });
  for (Status& status : statuses) EMBER_RETURN_IF_ERROR(status);
  return Status::OK();
}

Result<Tensor> GraphExecutor::ScratchFor(std::vector<std::vector<Tensor>>* scratch, int in, int k,
                                         const std::vector<int64_t>& shape) {
  std::vector<Tensor>& buffers = (*scratch)[in];
  if (static_cast<int>(buffers.size()) <= k) buffers.resize(k + 1);
  if (!buffers[k].defined() || buffers[k].shape() != shape) {
    EMBER_ASSIGN_OR_RETURN(buffers[k], NewTensor(shape));
  }
  return buffers[k];  // Shares storage.
}

Status GraphExecutor::EnsureBatch(int64_t batch) {
  if (batch == batch_) return Status::OK();
  const std::vector<GraphValue>& values = graph_->values();
  for (size_t id = 0; id < values.size(); ++id) {
    if (values[id].kind != ValueKind::kActivation) continue;
    EMBER_ASSIGN_OR_RETURN(values_[id], NewTensor(Batched(batch, values[id].shape)));
  }
  for (size_t id = 0; id < values.size(); ++id) {
    // Saved-for-backward outputs carry no gradient.
    if (values[id].kind == ValueKind::kParameter || values[id].saved_for_backward) continue;
    EMBER_ASSIGN_OR_RETURN(grads_[id], NewTensor(Batched(batch, values[id].shape)));
    scratch_[id].clear();
  }
  batch_ = batch;
  return Status::OK();
}

const Tensor& GraphExecutor::ValueTensor(int id) const {
  const int slot = parameter_slot_[id];
  return slot >= 0 ? parameters_[slot] : values_[id];
}

const Tensor& GraphExecutor::output(int i) const { return values_[graph_->outputs()[i]]; }

Status GraphExecutor::Forward(const std::vector<Tensor>& inputs, bool training) {
  if (weights_pending_) {
    return Status::FailedPrecondition(
        "Forward before the BackwardWeights of the last BackwardInputs");
  }
  const std::vector<int>& ids = graph_->inputs();
  if (inputs.size() != ids.size()) {
    return Status::InvalidArgument("the graph takes ", ids.size(), " inputs, got ",
                                   inputs.size());
  }
  const int64_t batch = inputs.empty() || inputs[0].ndim() < 1 ? -1 : inputs[0].dim(0);
  for (size_t i = 0; i < ids.size(); ++i) {
    const GraphValue& v = graph_->values()[ids[i]];
    if (inputs[i].ndim() < 1 || inputs[i].dim(0) != batch || batch < 1 ||
        inputs[i].numel() != batch * v.elements() || inputs[i].dtype() != DType::kF32 ||
        inputs[i].device() != device_) {
      return Status::InvalidArgument("graph input \"", v.name, "\" is ", inputs[i].DebugString(),
                                     ", expected ", v.elements(), " f32 per example for ", batch,
                                     " examples on ", device_.ToString());
    }
  }
  EMBER_RETURN_IF_ERROR(EnsureBatch(batch));
  for (size_t i = 0; i < ids.size(); ++i) {
    values_[ids[i]] = inputs[i].Reshape(Batched(batch, graph_->values()[ids[i]].shape));
  }
  const int shards = forward_shards_ = ShardsFor(batch);
  forward_training_ = training;
  ResetBf16Copies(std::max(shards, 1));
  Status status = shards > 0 ? RunShards(shards,
                                         [&](int shard, int64_t begin, int64_t end) {
                                           return ForwardRows(shard, begin, end, training);
                                         })
                             : ForwardRows(0, 0, batch, training);
  for (int64_t& step : node_steps_) ++step;
  return status;
}

void GraphExecutor::ResetBf16Copies(int shards) {
  for (std::vector<Tensor>& copies : bf16_copies_) {
    for (Tensor& copy : copies) copy = Tensor();  // Back to the caching allocator.
  }
  if (shards == 0) return;
  if (!device_.is_cpu() || precision_ != ComputePrecision::kBf16) {
    bf16_copies_.clear();
    return;
  }
  if (static_cast<int>(bf16_copies_.size()) < shards) bf16_copies_.resize(shards);
  for (std::vector<Tensor>& copies : bf16_copies_) copies.resize(graph_->values().size());
}

void GraphExecutor::AddBf16Copies(int shard, const GraphNode& node, KernelContext* context) {
  if (static_cast<size_t>(shard) >= bf16_copies_.size() || bf16_copies_[shard].empty()) return;
  std::vector<Tensor>& copies = bf16_copies_[shard];
  for (int in : node.inputs) context->input_bf16.push_back(&copies[in]);
  for (int out : node.outputs) context->output_bf16.push_back(&copies[out]);
}

Status GraphExecutor::ForwardRows(int shard, int64_t begin, int64_t end, bool training) {
  RowViews rows(*graph_, begin, end, batch_);
  const std::vector<GraphNode>& nodes = graph_->nodes();
  for (size_t n = 0; n < nodes.size(); ++n) {
    KernelContext context;
    context.attrs = &nodes[n].attrs;
    context.step = node_steps_[n];
    context.training = training;
    context.stream = stream_;
    context.precision = precision_;
    context.loss_examples = batch_;
    context.experts = experts_;
    context.node = static_cast<int>(n);
    rows.Reserve(nodes[n].inputs.size() + nodes[n].outputs.size());
    for (int in : nodes[n].inputs) context.inputs.push_back(rows(&ValueTensor(in), in));
    for (int out : nodes[n].outputs) context.outputs.push_back(rows(&values_[out], out));
    AddBf16Copies(shard, nodes[n], &context);
    Status status = kernels_[n]->forward(context);
    if (!status.ok()) return status.WithContext("node \"" + nodes[n].name + "\"");
  }
  return Status::OK();
}

Status GraphExecutor::Backward(const std::vector<Tensor>& output_grads,
                               const std::vector<Tensor*>& input_grads) {
  return RunBackward(Pass::kWhole, output_grads, input_grads);
}

Status GraphExecutor::BackwardInputs(const std::vector<Tensor>& output_grads,
                                     const std::vector<Tensor*>& input_grads) {
  return RunBackward(Pass::kInputs, output_grads, input_grads);
}

Status GraphExecutor::BackwardWeights() {
  if (!weights_pending_) {
    return Status::FailedPrecondition("BackwardWeights without a BackwardInputs before it");
  }
  return RunBackward(Pass::kWeights, {}, {});
}

Status GraphExecutor::RunBackward(Pass pass, const std::vector<Tensor>& output_grads,
                                  const std::vector<Tensor*>& input_grads) {
  const std::vector<int>& outputs = graph_->outputs();
  if (batch_ < 1) return Status::FailedPrecondition("Backward before Forward");
  if (pass != Pass::kWeights && weights_pending_) {
    return Status::FailedPrecondition("Backward before the BackwardWeights of the last "
                                      "BackwardInputs");
  }
  // The parameters whose gradients this pass computes.
  const auto computes = [&](int slot) {
    return pass == Pass::kWhole || (deferred_[slot] != 0) == (pass == Pass::kWeights);
  };
  // Which values get no gradient from this pass: graph inputs unless the
  // caller asks for them; in the first half the deferred parameters; in the
  // second everything but them.
  std::vector<char> skip(graph_->values().size(), 0);
  for (size_t i = 0; i < graph_->inputs().size(); ++i) {
    skip[graph_->inputs()[i]] = i >= input_grads.size() || input_grads[i] == nullptr;
  }
  for (size_t id = 0; id < skip.size(); ++id) {
    const int slot = parameter_slot_[id];
    if (pass == Pass::kWeights) skip[id] = slot < 0 || !deferred_[slot];
    if (pass == Pass::kInputs && slot >= 0 && deferred_[slot]) skip[id] = 1;
  }
  // Which values have a gradient so far: the first contribution is written
  // in place, later ones through scratch and added. The second half starts
  // where the first ended.
  std::vector<char> has_grad(graph_->values().size(), 0);
  if (pass == Pass::kWeights) {
    has_grad = pending_has_grad_[0];
  } else {
    if (output_grads.size() != outputs.size()) {
      return Status::InvalidArgument("the graph has ", outputs.size(), " outputs, got ",
                                     output_grads.size(), " gradients");
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      const Tensor& want = values_[outputs[i]];
      if (output_grads[i].numel() != want.numel() || output_grads[i].dtype() != DType::kF32 ||
          output_grads[i].device() != device_) {
        return Status::InvalidArgument("gradient of output \"",
                                       graph_->values()[outputs[i]].name, "\" is ",
                                       output_grads[i].DebugString(), ", expected ",
                                       want.DebugString());
      }
      EMBER_RETURN_IF_ERROR(CopyTensor(output_grads[i], &grads_[outputs[i]], stream_));
      has_grad[outputs[i]] = 1;
    }
  }
  if (pass == Pass::kWhole) ready_.assign(parameters_.size(), 0);
  const int shards = forward_shards_;
  const std::vector<int>& parameters = graph_->parameters();
  if (shards == 0) {
    EMBER_RETURN_IF_ERROR(
        BackwardRows(pass, 0, 0, batch_, skip, &has_grad, &gradients_, &scratch_));
    if (pass == Pass::kInputs) pending_has_grad_ = {has_grad};
  } else {
    // Shard 0 writes the parameter gradients, any others their own partial
    // sums, added to them in shard order: the same bits for the same number
    // of shards, whichever threads run them.
    shard_gradients_.resize(shards - 1);
    for (std::vector<Tensor>& grads : shard_gradients_) {
      if (grads.size() == parameters.size()) continue;
      grads.clear();
      for (int id : parameters) grads.push_back(Tensor::Empty(graph_->values()[id].shape));
    }
    shard_scratch_.resize(shards, std::vector<std::vector<Tensor>>(graph_->values().size()));
    std::vector<std::vector<char>> shard_has_grad =
        pass == Pass::kWeights ? pending_has_grad_
                               : std::vector<std::vector<char>>(shards, has_grad);
    EMBER_RETURN_IF_ERROR(RunShards(shards, [&](int shard, int64_t begin, int64_t end) {
      return BackwardRows(pass, shard, begin, end, skip, &shard_has_grad[shard],
                          shard == 0 ? &gradients_ : &shard_gradients_[shard - 1],
                          &shard_scratch_[shard]);
    }));
    has_grad = shard_has_grad[0];  // The same graph reaches the same values in every shard.
    for (size_t p = 0; p < parameters.size(); ++p) {
      if (!has_grad[parameters[p]] || !computes(static_cast<int>(p))) continue;
      for (const std::vector<Tensor>& grads : shard_gradients_) {
        EMBER_RETURN_IF_ERROR(Accumulate(grads[p], &gradients_[p]));
      }
      if (pass == Pass::kWhole && shards > 1 && on_gradient_ready_) {
        ready_[p] = 1;
        on_gradient_ready_(static_cast<int>(p));
      }
    }
    if (pass == Pass::kInputs) pending_has_grad_ = std::move(shard_has_grad);
  }
  weights_pending_ = pass == Pass::kInputs;
  if (pass == Pass::kWeights) pending_has_grad_.clear();
  // The second half still reads the bf16 copies and the loss' examples.
  if (pass != Pass::kInputs) {
    ResetBf16Copies(0);
    loss_examples_ = 0;
  }
  // Parameters no node reached keep a zero gradient.
  for (int id : parameters) {
    const int slot = parameter_slot_[id];
    if (!has_grad[id] && computes(slot)) {
      EMBER_RETURN_IF_ERROR(ZeroTensor(&gradients_[slot], stream_));
    }
  }
  if (pass == Pass::kWhole && on_gradient_ready_) {
    for (size_t slot = 0; slot < ready_.size(); ++slot) {
      if (!ready_[slot]) on_gradient_ready_(static_cast<int>(slot));
    }
  }
  const std::vector<int>& ids = graph_->inputs();
  for (size_t i = 0; i < input_grads.size() && i < ids.size(); ++i) {
    if (input_grads[i] == nullptr) continue;
    Tensor* out = input_grads[i];
    if (out->numel() != grads_[ids[i]].numel() || out->dtype() != DType::kF32 ||
        out->device() != device_) {
      return Status::InvalidArgument("gradient of input \"", graph_->values()[ids[i]].name,
                                     "\" is ", out->DebugString(), ", expected ",
                                     grads_[ids[i]].DebugString());
    }
    EMBER_RETURN_IF_ERROR(has_grad[ids[i]] ? CopyTensor(grads_[ids[i]], out, stream_)
                                           : ZeroTensor(out, stream_));
  }
  return Status::OK();
}

Status GraphExecutor::BackwardRows(Pass pass, int shard, int64_t begin, int64_t end,
                                   const std::vector<char>& skip, std::vector<char>* has_grad_of,
                                   std::vector<Tensor>* parameter_grads,
                                   std::vector<std::vector<Tensor>>* scratch) {
  std::vector<char>& has_grad = *has_grad_of;
  RowViews rows(*graph_, begin, end, batch_);
  const std::vector<GraphNode>& nodes = graph_->nodes();
  for (size_t n = nodes.size(); n-- > 0;) {
    const GraphNode& node = nodes[n];
    if (pass == Pass::kWeights && !node_splits_[n]) continue;  // Ran whole in the first half.
    bool any = false;
    for (int out : node.outputs) any = any || has_grad[out];
    if (!any) continue;  // Nothing downstream of this node reaches an output.
    KernelContext context;
    context.attrs = &node.attrs;
    context.step = node_steps_[n] - 1;  // The step of the forward call.
    context.training = forward_training_;
    context.stream = stream_;
    context.precision = precision_;
    context.loss_examples = std::max(loss_examples_, batch_);
    context.experts = experts_;
    context.node = static_cast<int>(n);
    // Every consumer of the node's outputs ran before it (reverse order):
    // their gradients are complete, and read by no one after this kernel.
    context.output_grads_disposable = true;
    rows.Reserve(3 * node.inputs.size() + 2 * node.outputs.size());
    for (int in : node.inputs) context.inputs.push_back(rows(&ValueTensor(in), in));
    for (int out : node.outputs) {
      context.outputs.push_back(rows(&values_[out], out));
      if (graph_->values()[out].saved_for_backward) {
        context.output_grads.push_back(nullptr);
        continue;
      }
      Tensor* grad = rows(&grads_[out], out);
      if (!has_grad[out]) {
        EMBER_RETURN_IF_ERROR(ZeroTensor(grad, stream_));
        has_grad[out] = 1;
      }
      context.output_grads.push_back(grad);
    }
    AddBf16Copies(shard, node, &context);
    // Inputs whose gradient went to scratch (or, for a value read twice by
    // this node, a temporary), to add once the kernel is done.
    std::vector<std::pair<int, Tensor>> accumulate;
    accumulate.reserve(node.inputs.size());  // Targets point into it.
    for (int in : node.inputs) {
      if (skip[in]) {
        context.input_grads.push_back(nullptr);
        continue;
      }
      const int slot = parameter_slot_[in];
      const GraphValue& v = graph_->values()[in];
      const std::vector<int64_t> shape = slot >= 0 ? v.shape : Batched(end - begin, v.shape);
      Tensor* target = nullptr;
      if (!has_grad[in]) {
        target = slot >= 0 ? &(*parameter_grads)[slot] : rows(&grads_[in], in);
        has_grad[in] = 1;
      } else {
        int earlier = 0;
        for (const auto& [id, tensor] : accumulate) earlier += id == in;
        EMBER_ASSIGN_OR_RETURN(Tensor buffer, ScratchFor(scratch, in, earlier, shape));
        accumulate.emplace_back(in, buffer);
        target = &accumulate.back().second;
      }
      context.input_grads.push_back(target);
    }
    Status status = kernels_[n]->backward(context);
    if (!status.ok()) return status.WithContext("backward of node \"" + node.name + "\"");
    for (const auto& [in, tensor] : accumulate) {
      const int slot = parameter_slot_[in];
      EMBER_RETURN_IF_ERROR(
          Accumulate(tensor, slot >= 0 ? &(*parameter_grads)[slot] : rows(&grads_[in], in)));
    }
    // In one range, the parameters this node read first are final now.
    if (pass == Pass::kWhole && forward_shards_ <= 1 && on_gradient_ready_) {
      for (int in : node.inputs) {
        const int slot = parameter_slot_[in];
        if (slot >= 0 && first_reader_[slot] == static_cast<int>(n) && !ready_[slot]) {
          ready_[slot] = 1;
          on_gradient_ready_(slot);
        }
      }
    }
  }
  return Status::OK();
}

}  // namespace ember::ops
