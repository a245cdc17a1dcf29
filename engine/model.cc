#include "engine/model.h"

#include "engine/model_zoo.h"

namespace ember::engine {

Result<std::unique_ptr<DenseModel>> DenseModel::Create(const ModelOptions& options) {
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<ops::Graph> graph,
                         BuildModelGraph(options, ops::DefaultOpRegistry()));
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<ops::GraphExecutor> executor,
                         ops::GraphExecutor::Create(graph.get(), options.seed));
  return std::unique_ptr<DenseModel>(
      new DenseModel(options, std::move(graph), std::move(executor)));
}

DenseModel::DenseModel(const ModelOptions& options, std::unique_ptr<ops::Graph> graph,
                       std::unique_ptr<ops::GraphExecutor> executor)
    : options_(options), graph_(std::move(graph)), executor_(std::move(executor)) {
  // Parameter shares the executor's tensors (Tensor shares its storage).
  for (size_t i = 0; i < executor_->parameters().size(); ++i) {
    parameters_.push_back(Parameter{executor_->parameters()[i], executor_->gradients()[i], {}});
  }
}

Status DenseModel::Forward(const Tensor& dense, const Tensor& pooled, Tensor* logits) {
  inputs_.clear();
  if (options_.num_dense > 0) inputs_.push_back(dense);
  inputs_.push_back(pooled);
  EMBER_RETURN_IF_ERROR(executor_->Forward(inputs_));
  *logits = executor_->output(0);
  return Status::OK();
}

Status DenseModel::Backward(const Tensor& dlogits, Tensor* dpooled) {
  std::vector<Tensor*> input_grads(inputs_.size(), nullptr);
  input_grads.back() = dpooled;
  return executor_->Backward({dlogits}, input_grads);
}

std::vector<Parameter*> DenseModel::parameters() {
  std::vector<Parameter*> params;
  for (Parameter& p : parameters_) params.push_back(&p);
  return params;
}

int64_t DenseModel::forward_flops_per_example() const {
  double flops = 0;
  for (size_t n = 0; n < graph_->nodes().size(); ++n) {
    flops += graph_->NodeCost(static_cast<int>(n), 1, /*backward=*/false).flops;
  }
  return static_cast<int64_t>(flops);
}

}  // namespace ember::engine
