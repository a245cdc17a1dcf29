#pragma once

// GraphExecutor: runs a Graph's forward and backward on the CPU with the
// kernels of its registry, holding the parameters, their gradients and the
// activations of the last forward (saved-for-backward outputs included; those
// get no gradient buffer).

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/graph.h"

namespace ember::ops {

// Thread safety: none; one executor per dense stage.
class GraphExecutor {
 public:
  // Parameters are initialised from `seed` (see Initializer). NotFound when
  // a node's op has no CPU kernel; InvalidArgument for a graph without
  // outputs.
  static Result<std::unique_ptr<GraphExecutor>> Create(const Graph* graph, uint64_t seed);

  // Runs every node on `inputs` (one per graph input, in AddInput order,
  // each [B, per-example shape...] or [B, elements]); the inputs must stay
  // alive and unchanged until Backward. InvalidArgument naming the input on
  // a shape mismatch.
  Status Forward(const std::vector<Tensor>& inputs, bool training = true);
  // The value of graph output i after Forward ([B, shape...]).
  const Tensor& output(int i) const;
  // From the gradient of the objective with respect to each output, fills
  // every parameter's gradient (overwritten) and, for each non-null
  // input_grads[i], the gradient with respect to graph input i.
  Status Backward(const std::vector<Tensor>& output_grads, const std::vector<Tensor*>& input_grads);

  // Parameters and their gradients, in Graph::parameters() order.
  std::vector<Tensor>& parameters() { return parameters_; }
  std::vector<Tensor>& gradients() { return gradients_; }
  const Graph& graph() const { return *graph_; }
  int64_t batch() const { return batch_; }

 private:
  GraphExecutor(const Graph* graph, std::vector<const KernelPair*> kernels);
  Status EnsureBatch(int64_t batch);
  // The tensor of value `id` (an input, a parameter or an activation).
  const Tensor& ValueTensor(int id) const;

  const Graph* graph_;
  std::vector<const KernelPair*> kernels_;  // Per node.
  std::vector<Tensor> parameters_;
  std::vector<Tensor> gradients_;
  std::vector<int> parameter_slot_;  // Value id -> index in parameters_, or -1.
  int64_t batch_ = -1;
  std::vector<Tensor> values_;    // Per value id: inputs (borrowed) and activations.
  std::vector<Tensor> grads_;     // Per value id, for backward.
  std::vector<Tensor> scratch_;   // Per value id: a second contribution.
  std::vector<int64_t> node_steps_;
};

}  // namespace ember::ops
