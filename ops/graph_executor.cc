#include "ops/graph_executor.h"

#include <cmath>
#include <cstring>

#include "core/random.h"
#include "core/simd.h"

namespace ember::ops {
namespace {

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

// to += from, for a value with several consumers (a gradient arriving in
// parts). numel() walks the shape: taken once, not per element.
void Accumulate(const Tensor& from, Tensor* to) {
  AddTo(from.data<float>(), to->numel(), to->data<float>());
}

}  // namespace

Result<std::unique_ptr<GraphExecutor>> GraphExecutor::Create(const Graph* graph, uint64_t seed) {
  if (graph->outputs().empty()) return Status::InvalidArgument("the graph has no outputs");
  std::vector<const KernelPair*> kernels;
  for (const GraphNode& node : graph->nodes()) {
    Result<const KernelPair*> kernel = graph->registry().FindKernel(node.op, DeviceType::kCpu);
    if (!kernel.ok()) return kernel.status().WithContext("node \"" + node.name + "\"");
    kernels.push_back(*kernel);
  }
  std::unique_ptr<GraphExecutor> executor(new GraphExecutor(graph, std::move(kernels)));
  for (int id : graph->parameters()) {
    const GraphValue& v = graph->values()[id];
    Tensor value = Tensor::Zeros(v.shape);
    if (v.initializer == Initializer::kHeUniform) {
      RandomStream random(seed, NameHash(v.name));
      const double bound = std::sqrt(6.0 / static_cast<double>(v.fan_in));
      float* w = value.data<float>();
      for (int64_t i = 0; i < value.numel(); ++i) {
        w[i] = static_cast<float>(random.Uniform(-bound, bound));
      }
    }
    executor->parameter_slot_[id] = static_cast<int>(executor->parameters_.size());
    executor->parameters_.push_back(value);
    executor->gradients_.push_back(Tensor::Zeros(v.shape));
  }
  return executor;
}

GraphExecutor::GraphExecutor(const Graph* graph, std::vector<const KernelPair*> kernels)
    : graph_(graph),
      kernels_(std::move(kernels)),
      parameter_slot_(graph->values().size(), -1),
      values_(graph->values().size()),
      grads_(graph->values().size()),
      scratch_(graph->values().size()),
      node_steps_(graph->nodes().size(), 0) {}

Status GraphExecutor::EnsureBatch(int64_t batch) {
  if (batch == batch_) return Status::OK();
  const std::vector<GraphValue>& values = graph_->values();
  for (size_t id = 0; id < values.size(); ++id) {
    if (values[id].kind != ValueKind::kActivation) continue;
    values_[id] = Tensor::Empty(Batched(batch, values[id].shape));
  }
  for (size_t id = 0; id < values.size(); ++id) {
    // Saved-for-backward outputs carry no gradient.
    if (values[id].kind == ValueKind::kParameter || values[id].saved_for_backward) continue;
    grads_[id] = Tensor::Empty(Batched(batch, values[id].shape));
    scratch_[id] = Tensor();
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
  const std::vector<int>& ids = graph_->inputs();
  if (inputs.size() != ids.size()) {
    return Status::InvalidArgument("the graph takes ", ids.size(), " inputs, got ",
                                   inputs.size());
  }
  const int64_t batch = inputs.empty() || inputs[0].ndim() < 1 ? -1 : inputs[0].dim(0);
  for (size_t i = 0; i < ids.size(); ++i) {
    const GraphValue& v = graph_->values()[ids[i]];
    if (inputs[i].ndim() < 1 || inputs[i].dim(0) != batch || batch < 1 ||
        inputs[i].numel() != batch * v.elements() || inputs[i].dtype() != DType::kF32) {
      return Status::InvalidArgument("graph input \"", v.name, "\" is ",
                                     inputs[i].DebugString(), ", expected ", v.elements(),
                                     " f32 per example for ", batch, " examples");
    }
  }
  EMBER_RETURN_IF_ERROR(EnsureBatch(batch));
  for (size_t i = 0; i < ids.size(); ++i) {
    values_[ids[i]] = inputs[i].Reshape(Batched(batch, graph_->values()[ids[i]].shape));
  }
  const std::vector<GraphNode>& nodes = graph_->nodes();
  for (size_t n = 0; n < nodes.size(); ++n) {
    KernelContext context;
    context.attrs = &nodes[n].attrs;
    context.step = node_steps_[n]++;
    context.training = training;
    for (int in : nodes[n].inputs) context.inputs.push_back(&ValueTensor(in));
    for (int out : nodes[n].outputs) context.outputs.push_back(&values_[out]);
    Status status = kernels_[n]->forward(context);
    if (!status.ok()) return status.WithContext("node \"" + nodes[n].name + "\"");
  }
  return Status::OK();
}

Status GraphExecutor::Backward(const std::vector<Tensor>& output_grads,
                               const std::vector<Tensor*>& input_grads) {
  const std::vector<int>& outputs = graph_->outputs();
  if (batch_ < 1) return Status::FailedPrecondition("Backward before Forward");
  if (output_grads.size() != outputs.size()) {
    return Status::InvalidArgument("the graph has ", outputs.size(), " outputs, got ",
                                   output_grads.size(), " gradients");
  }
  // Which values have a gradient so far: the first contribution is written
  // in place, later ones through scratch and added.
  std::vector<char> has_grad(graph_->values().size(), 0);
  // Graph inputs get a gradient only when the caller asks for it.
  std::vector<char> skip(graph_->values().size(), 0);
  for (size_t i = 0; i < graph_->inputs().size(); ++i) {
    skip[graph_->inputs()[i]] = i >= input_grads.size() || input_grads[i] == nullptr;
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& want = values_[outputs[i]];
    if (output_grads[i].numel() != want.numel()) {
      return Status::InvalidArgument("gradient of output \"",
                                     graph_->values()[outputs[i]].name, "\" is ",
                                     output_grads[i].DebugString(), ", expected ",
                                     want.DebugString());
    }
    std::memcpy(grads_[outputs[i]].raw_data(), output_grads[i].raw_data(), want.nbytes());
    has_grad[outputs[i]] = 1;
  }
  const std::vector<GraphNode>& nodes = graph_->nodes();
  for (size_t n = nodes.size(); n-- > 0;) {
    const GraphNode& node = nodes[n];
    bool any = false;
    for (int out : node.outputs) any = any || has_grad[out];
    if (!any) continue;  // Nothing downstream of this node reaches an output.
    KernelContext context;
    context.attrs = &node.attrs;
    context.step = node_steps_[n] - 1;  // The step of the forward call.
    for (int in : node.inputs) context.inputs.push_back(&ValueTensor(in));
    for (int out : node.outputs) {
      context.outputs.push_back(&values_[out]);
      if (graph_->values()[out].saved_for_backward) {
        context.output_grads.push_back(nullptr);
        continue;
      }
      if (!has_grad[out]) {
        std::memset(grads_[out].raw_data(), 0, grads_[out].nbytes());
        has_grad[out] = 1;
      }
      context.output_grads.push_back(&grads_[out]);
    }
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
      const std::vector<int64_t> shape = slot >= 0 ? v.shape : Batched(batch_, v.shape);
      Tensor* target = nullptr;
      if (!has_grad[in]) {
        target = slot >= 0 ? &gradients_[slot] : &grads_[in];
        has_grad[in] = 1;
      } else {
        bool scratch_taken = false;
        for (const auto& [id, tensor] : accumulate) scratch_taken = scratch_taken || id == in;
        Tensor buffer;
        if (scratch_taken) {
          buffer = Tensor::Empty(shape);
        } else {
          if (scratch_[in].numel() != v.elements() * (slot >= 0 ? 1 : batch_)) {
            scratch_[in] = Tensor::Empty(shape);
          }
          buffer = scratch_[in];  // Shares storage.
        }
        accumulate.emplace_back(in, buffer);
        target = &accumulate.back().second;
      }
      context.input_grads.push_back(target);
    }
    Status status = kernels_[n]->backward(context);
    if (!status.ok()) return status.WithContext("backward of node \"" + node.name + "\"");
    for (const auto& [in, tensor] : accumulate) {
      const int slot = parameter_slot_[in];
      Accumulate(tensor, slot >= 0 ? &gradients_[slot] : &grads_[in]);
    }
  }
  // Parameters no node reached keep a zero gradient.
  for (int id : graph_->parameters()) {
    if (!has_grad[id]) {
      Tensor& g = gradients_[parameter_slot_[id]];
      std::memset(g.raw_data(), 0, g.nbytes());
    }
  }
  const std::vector<int>& ids = graph_->inputs();
  for (size_t i = 0; i < input_grads.size() && i < ids.size(); ++i) {
    if (input_grads[i] == nullptr) continue;
    Tensor* out = input_grads[i];
    if (out->numel() != grads_[ids[i]].numel()) {
      return Status::InvalidArgument("gradient of input \"", graph_->values()[ids[i]].name,
                                     "\" is ", out->DebugString(), ", expected ",
                                     grads_[ids[i]].DebugString());
    }
    if (has_grad[ids[i]]) {
      std::memcpy(out->raw_data(), grads_[ids[i]].raw_data(), out->nbytes());
    } else {
      std::memset(out->raw_data(), 0, out->nbytes());
    }
  }
  return Status::OK();
}

}  // namespace ember::ops
