#pragma once

// The dense half of a CTR model: a graph of registered operators
// (ops/graph.h) built by the model zoo (engine/model_zoo.h) and run by a
// GraphExecutor. Its inputs are the dense features and the pooled
// embeddings of every slot; its output is a logit per task (one, the click,
// except for multi-task models).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/dense_optimizer.h"
#include "ops/graph.h"
#include "ops/graph_executor.h"

namespace ember::engine {

// A trainable tensor with its gradient and optimizer state.
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
};

// Thread safety: none; one model belongs to one dense stage.
class DenseModel {
 public:
  // InvalidArgument on inconsistent options or an unknown model name.
  static Result<std::unique_ptr<DenseModel>> Create(const ModelOptions& options);

  // logits[B, num_tasks] from dense[B, num_dense] (not read when num_dense is 0)
  // and pooled[B, num_slots * dim]. The inputs must stay alive and
  // unchanged until Backward.
  Status Forward(const Tensor& dense, const Tensor& pooled, Tensor* logits);
  // From dlogits[B, num_tasks] (after Forward), fills every parameter's grad and
  // dpooled[B, num_slots * dim].
  Status Backward(const Tensor& dlogits, Tensor* dpooled);

  std::vector<Parameter*> parameters();
  const ModelOptions& options() const { return options_; }
  const ops::Graph& graph() const { return *graph_; }
  // Forward multiply-adds x2 of one example (from the graph's op costs).
  int64_t forward_flops_per_example() const;

 private:
  DenseModel(const ModelOptions& options, std::unique_ptr<ops::Graph> graph,
             std::unique_ptr<ops::GraphExecutor> executor);

  ModelOptions options_;
  std::unique_ptr<ops::Graph> graph_;
  std::unique_ptr<ops::GraphExecutor> executor_;
  std::vector<Parameter> parameters_;
  std::vector<Tensor> inputs_;
};

}  // namespace ember::engine
