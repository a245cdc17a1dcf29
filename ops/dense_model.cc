#include "ops/dense_model.h"

#include <array>
#include <utility>

#include "core/allocator.h"
#include "core/tensor_copy.h"
#include "ops/dense_ops_cuda.h"

namespace ember::ops {
namespace {

// A parameter's tensors in checkpoint order.
std::array<Tensor*, 3> StateTensors(Parameter& p) {
  return {&p.value, &p.slot.first_moment, &p.slot.second_moment};
}
std::array<const Tensor*, 3> StateTensors(const Parameter& p) {
  return {&p.value, &p.slot.first_moment, &p.slot.second_moment};
}

}  // namespace

Result<std::unique_ptr<DenseModel>> DenseModel::Create(std::unique_ptr<Graph> graph,
                                                       const DenseModelOptions& options) {
  if (graph == nullptr) return Status::InvalidArgument("the dense model has no graph");
  const std::vector<int>& inputs = graph->inputs();
  const auto input_named = [&](size_t i, const char* name) {
    return i < inputs.size() && graph->values()[inputs[i]].name == name;
  };
  const bool has_dense = input_named(0, "dense");
  if (inputs.size() != (has_dense ? 2u : 1u) || !input_named(inputs.size() - 1, "pooled")) {
    return Status::InvalidArgument(
        "a dense model's graph takes the inputs \"dense\" (optional) and \"pooled\", in that "
        "order; this one takes ",
        inputs.size(), " inputs");
  }
  if (graph->outputs().size() != 1) {
    return Status::InvalidArgument("a dense model's graph has one output (the logits), this one ",
                                   graph->outputs().size());
  }
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<GraphExecutor> executor,
                         GraphExecutor::Create(graph.get(), options.seed, options.device));
  EMBER_RETURN_IF_ERROR(executor->set_precision(options.precision));
  EMBER_RETURN_IF_ERROR(
      executor->set_row_shards(options.cpu_row_shards).WithContext("the dense model"));
  return std::unique_ptr<DenseModel>(
      new DenseModel(options, std::move(graph), std::move(executor)));
}

DenseModel::DenseModel(const DenseModelOptions& options, std::unique_ptr<Graph> graph,
                       std::unique_ptr<GraphExecutor> executor)
    : options_(options), graph_(std::move(graph)), executor_(std::move(executor)) {
  const std::vector<int>& inputs = graph_->inputs();
  if (inputs.size() == 2) num_dense_ = graph_->values()[inputs[0]].elements();
  pooled_width_ = graph_->values()[inputs.back()].elements();
  num_tasks_ = static_cast<int>(graph_->values()[graph_->outputs()[0]].elements());
  // Parameter shares the executor's tensors (Tensor shares its storage).
  for (size_t i = 0; i < executor_->parameters().size(); ++i) {
    parameters_.push_back(Parameter{executor_->parameters()[i], executor_->gradients()[i], {}});
  }
}

Allocator* DenseModel::host_allocator() const {
  return device().is_cpu() ? CpuAllocator() : PinnedHostAllocator();
}

Result<Tensor> DenseModel::Reusable(Tensor* buffer, std::vector<int64_t> shape, bool pinned) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (!buffer->defined() || buffer->numel() < n) {
    EMBER_ASSIGN_OR_RETURN(
        *buffer, pinned ? Tensor::Allocate({n}, DType::kF32, Device::Cpu(), PinnedHostAllocator())
                        : Tensor::Allocate({n}, DType::kF32, device()));
  }
  return buffer->Slice(0, n).Reshape(std::move(shape));
}

Result<Tensor> DenseModel::CopyIn(const char* what, const Tensor& tensor, Tensor* buffer) {
  if (!tensor.defined() || !tensor.device().is_cpu() || tensor.dtype() != DType::kF32) {
    return Status::InvalidArgument("the dense model on ", device().ToString(), " takes ", what,
                                   " as an f32 host tensor, got ",
                                   tensor.defined() ? tensor.DebugString() : "none");
  }
  EMBER_ASSIGN_OR_RETURN(Tensor on_device, Reusable(buffer, tensor.shape(), /*pinned=*/false));
  EMBER_RETURN_IF_ERROR(CopyTensor(tensor, &on_device, executor_->stream()));
  return on_device;
}

Status DenseModel::Forward(const Tensor& dense, const Tensor& pooled, Tensor* logits,
                           bool training) {
  inputs_.clear();
  executor_->set_expert_parallel(training ? experts_.get() : nullptr);
  if (device().is_cpu()) {
    if (num_dense_ > 0) inputs_.push_back(dense);
    inputs_.push_back(pooled);
    EMBER_RETURN_IF_ERROR(executor_->Forward(inputs_, training));
    *logits = executor_->output(0);
    return Status::OK();
  }
  return WaitingOnFailure([&]() -> Status {
    if (num_dense_ > 0) {
      EMBER_ASSIGN_OR_RETURN(Tensor on_device, CopyIn("dense", dense, &dense_buffer_));
      inputs_.push_back(on_device);
    }
    EMBER_ASSIGN_OR_RETURN(Tensor on_device, CopyIn("pooled", pooled, &pooled_buffer_));
    inputs_.push_back(on_device);
    EMBER_RETURN_IF_ERROR(executor_->Forward(inputs_, training));
    const Tensor& out = executor_->output(0);
    EMBER_ASSIGN_OR_RETURN(Tensor host, Reusable(&logits_host_, out.shape(), /*pinned=*/true));
    EMBER_RETURN_IF_ERROR(CopyTensor(out, &host, executor_->stream()));
    EMBER_RETURN_IF_ERROR(executor_->stream()->Synchronize().WithContext("the dense forward"));
    *logits = host;
    return Status::OK();
  });
}

Status DenseModel::WaitingOnFailure(const std::function<Status()>& body) {
  const Status status = body();
  // Copies from the caller's tensors may still be queued: the caller may
  // reuse its tensors once this returns.
  if (!status.ok()) executor_->stream()->Synchronize().IgnoreError();
  return status;
}

Status DenseModel::EnableExpertParallel(Communicator* comm) {
  bool any = false;
  auto experts = std::make_unique<ExpertParallel>(comm);
  const std::vector<GraphNode>& nodes = graph_->nodes();
  // Readers of each value (a graph output counts as one more).
  std::vector<int> readers(graph_->values().size(), 0);
  for (const GraphNode& node : nodes) {
    for (int in : node.inputs) ++readers[in];
  }
  for (int out : graph_->outputs()) ++readers[out];
  for (size_t n = 0; n < nodes.size(); ++n) {
    const GraphNode& node = nodes[n];
    if (node.op != "moe_expert_fc") continue;
    any = true;
    const int64_t count = graph_->values()[node.inputs[1]].shape[0];
    EMBER_RETURN_IF_ERROR(experts->CheckExperts(count).WithContext("layer \"" + node.name + "\""));
    // An expert layer that reads the output of one that only it reads: a
    // chain, whose rows stay on the owners between the two.
    const int from = graph_->values()[node.inputs[0]].producer;
    if (from >= 0 && nodes[from].op == "moe_expert_fc" && readers[node.inputs[0]] == 1) {
      experts->ChainLayers(from, static_cast<int>(n));
    }
  }
  if (!any) return Status::OK();
  experts_ = std::move(experts);
  return Status::OK();
}

int64_t DenseModel::expert_exchange_bytes() const {
  return experts_ == nullptr ? 0 : experts_->sent_bytes();
}

double DenseModel::expert_exchange_seconds() const {
  return experts_ == nullptr ? 0.0 : experts_->seconds();
}

Status DenseModel::Backward(const Tensor& dlogits, Tensor* dpooled, int64_t loss_examples) {
  if (inputs_.empty()) return Status::FailedPrecondition("Backward before Forward");
  executor_->set_loss_examples(loss_examples);
  std::vector<Tensor*> input_grads(inputs_.size(), nullptr);
  if (device().is_cpu()) {
    input_grads.back() = dpooled;
    return executor_->Backward({dlogits}, input_grads);
  }
  const Tensor& pooled = inputs_.back();
  if (dpooled == nullptr || !dpooled->defined() || !dpooled->device().is_cpu() ||
      dpooled->dtype() != DType::kF32 || dpooled->numel() != pooled.numel()) {
    return Status::InvalidArgument(
        "the dense model on ", device().ToString(), " writes dpooled to an f32 host tensor of ",
        pooled.numel(), " elements, got ",
        dpooled != nullptr && dpooled->defined() ? dpooled->DebugString() : "none");
  }
  return WaitingOnFailure([&]() -> Status {
    EMBER_ASSIGN_OR_RETURN(Tensor dlogits_on_device, CopyIn("dlogits", dlogits, &dlogits_buffer_));
    EMBER_ASSIGN_OR_RETURN(Tensor dpooled_on_device,
                           Reusable(&dpooled_buffer_, pooled.shape(), /*pinned=*/false));
    input_grads.back() = &dpooled_on_device;
    EMBER_RETURN_IF_ERROR(executor_->Backward({dlogits_on_device}, input_grads));
    EMBER_RETURN_IF_ERROR(CopyTensor(dpooled_on_device, dpooled, executor_->stream()));
    return executor_->stream()->Synchronize().WithContext("the dense backward");
  });
}

void DenseModel::set_on_gradient_ready(std::function<void(int parameter)> ready) {
  executor_->set_on_gradient_ready(std::move(ready));
}

Status DenseModel::InitOptimizer(const DenseOptimizerOptions& options) {
  for (Parameter& p : parameters_) {
    if (device().is_cpu()) {
      p.slot = NewDenseOptimizerSlot(options, p.value);
      continue;
    }
    EMBER_ASSIGN_OR_RETURN(p.slot,
                           NewDenseOptimizerSlotCuda(options, p.value, *executor_->stream()));
  }
  return Status::OK();
}

Status DenseModel::OptimizerStep(const DenseOptimizerOptions& options, int64_t step) {
  for (Parameter& p : parameters_) {
    EMBER_RETURN_IF_ERROR(device().is_cpu()
                              ? DenseOptimizerStep(options, step, p.grad, &p.value, &p.slot)
                              : DenseOptimizerStepCuda(options, step, p.grad, &p.value,
                                                            &p.slot, *executor_->stream()));
  }
  return Status::OK();
}

std::vector<Parameter*> DenseModel::parameters() {
  std::vector<Parameter*> params;
  for (Parameter& p : parameters_) params.push_back(&p);
  return params;
}

Result<std::vector<Parameter>> DenseModel::ParametersToHost() {
  std::vector<Parameter> host(parameters_.size());
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const std::array<const Tensor*, 3> from = StateTensors(std::as_const(parameters_[i]));
    const std::array<Tensor*, 3> to = StateTensors(host[i]);
    for (size_t t = 0; t < from.size(); ++t) {
      if (!from[t]->defined()) continue;
      *to[t] = Tensor::Empty(from[t]->shape());
      EMBER_RETURN_IF_ERROR(CopyTensor(*from[t], to[t], executor_->stream()));
    }
  }
  if (executor_->stream() != nullptr) {
    EMBER_RETURN_IF_ERROR(executor_->stream()->Synchronize().WithContext("copying parameters"));
  }
  return host;
}

Status DenseModel::ParametersFromHost(const std::vector<Parameter>& host) {
  if (host.size() != parameters_.size()) {
    return Status::InvalidArgument("the model has ", parameters_.size(), " parameters, got ",
                                   host.size());
  }
  // Check everything before changing anything.
  for (size_t i = 0; i < host.size(); ++i) {
    const std::array<Tensor*, 3> to = StateTensors(parameters_[i]);
    const std::array<const Tensor*, 3> from = StateTensors(host[i]);
    for (size_t t = 0; t < to.size(); ++t) {
      const bool fits =
          from[t]->defined() == to[t]->defined() &&
          (!to[t]->defined() || (from[t]->device().is_cpu() && from[t]->dtype() == DType::kF32 &&
                                 from[t]->numel() == to[t]->numel()));
      if (!fits) {
        return Status::InvalidArgument("parameter ", i, " tensor ", t, ": expected ",
                                       to[t]->defined() ? to[t]->DebugString() : "none", ", got ",
                                       from[t]->defined() ? from[t]->DebugString() : "none");
      }
    }
  }
  for (size_t i = 0; i < host.size(); ++i) {
    const std::array<Tensor*, 3> to = StateTensors(parameters_[i]);
    const std::array<const Tensor*, 3> from = StateTensors(host[i]);
    for (size_t t = 0; t < to.size(); ++t) {
      if (to[t]->defined()) EMBER_RETURN_IF_ERROR(CopyTensor(*from[t], to[t], executor_->stream()));
    }
  }
  if (executor_->stream() == nullptr) return Status::OK();
  return executor_->stream()->Synchronize().WithContext("copying parameters");
}

int DenseModel::row_ranges() const { return executor_->forward_row_ranges(); }

MoeStepStats DenseModel::moe_stats() const {
  if (!options_.device.is_cpu()) return {};
  return CollectMoeStats(*graph_, [&](int id) -> const Tensor* {
    const Tensor& value = executor_->value(id);
    return value.defined() ? &value : nullptr;
  });
}

int64_t DenseModel::forward_flops_per_example() const {
  double flops = 0;
  for (size_t n = 0; n < graph_->nodes().size(); ++n) {
    flops += graph_->NodeCost(static_cast<int>(n), 1, /*backward=*/false).flops;
  }
  return static_cast<int64_t>(flops);
}

}  // namespace ember::ops
