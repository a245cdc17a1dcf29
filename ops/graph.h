#pragma once

// Graph: a model's dense computation as a graph of registered operators
// (ops/op_registry.h) over named values, the form the scheduler places and
// splits and GraphExecutor runs. Values are the graph's inputs (batched,
// e.g. "dense" and the pooled embeddings), its parameters (trained, with an
// initialiser) and the activations nodes produce. Nodes are kept in the
// order they were added, which is a topological order: a node reads only
// values that exist when it is added.

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "ops/op_cost.h"
#include "ops/op_registry.h"

namespace ember::ops {

enum class ValueKind { kInput, kParameter, kActivation };

// How a parameter starts: zeros, or uniform in +-sqrt(6 / fan_in) (He
// uniform, for layers followed by a ReLU) drawn from (seed, value name).
enum class Initializer { kZeros, kHeUniform };

struct GraphValue {
  std::string name;
  ValueKind kind = ValueKind::kActivation;
  // Per example for inputs and activations (batch first, implicit); full for
  // parameters.
  std::vector<int64_t> shape;
  Initializer initializer = Initializer::kZeros;
  int64_t fan_in = 1;
  int producer = -1;  // The node that makes an activation.
  // An output its producer saves for its own backward (OpDef::saved_outputs):
  // it has no gradient, and no other node and no graph output reads it.
  bool saved_for_backward = false;
  bool batched() const { return kind != ValueKind::kParameter; }
  // Elements per example (batched) or in all (parameters).
  int64_t elements() const;
};

struct GraphNode {
  std::string name;
  std::string op;
  OpAttrs attrs;
  std::vector<int> inputs;
  std::vector<int> outputs;
};

class Graph {
 public:
  // `registry` (borrowed; must outlive the graph) defines the operators.
  explicit Graph(const OpRegistry* registry) : registry_(registry) {}

  // InvalidArgument for an empty or duplicate name or a non-positive size.
  Result<int> AddInput(const std::string& name, std::vector<int64_t> per_example_shape);
  Result<int> AddParameter(const std::string& name, std::vector<int64_t> shape,
                           Initializer initializer, int64_t fan_in = 1);
  // Adds a node of `op` reading `inputs` and returns its outputs, named
  // "<name>" (one output) or "<name>:<i>", then the outputs the op saves for
  // its backward, named "<name>:saved<i>". InvalidArgument naming the node
  // when the op is unknown, an input id is not a value or is saved for
  // another node's backward, or the op's shape inference rejects the inputs.
  Result<std::vector<int>> AddNode(const std::string& name, const std::string& op,
                                   const std::vector<int>& inputs, OpAttrs attrs = {});
  // Marks `value` as an output of the graph (the loss is taken on outputs).
  // InvalidArgument for a value that is not an activation or is saved for
  // its node's backward.
  Status MarkOutput(int value);

  const std::vector<GraphValue>& values() const { return values_; }
  const std::vector<GraphNode>& nodes() const { return nodes_; }
  const std::vector<int>& inputs() const { return inputs_; }
  const std::vector<int>& parameters() const { return parameters_; }
  const std::vector<int>& outputs() const { return outputs_; }
  const OpRegistry& registry() const { return *registry_; }
  // NotFound naming the value.
  Result<int> FindValue(const std::string& name) const;

  // Work of node `node`'s forward or backward at `batch` examples.
  OpCost NodeCost(int node, int64_t batch, bool backward) const;
  // Forward + backward of every node.
  OpCost TotalCost(int64_t batch) const;
  // Trained floats (elements of every parameter).
  int64_t parameter_count() const;
  // The graph in Graphviz DOT: values as ellipses (parameters grey), nodes
  // as boxes labelled with their op.
  std::string ToDot() const;

 private:
  Result<int> AddValue(GraphValue value);
  std::vector<InputShape> InputShapes(const std::vector<int>& inputs) const;

  const OpRegistry* registry_;
  std::vector<GraphValue> values_;
  std::vector<GraphNode> nodes_;
  std::vector<int> inputs_;
  std::vector<int> parameters_;
  std::vector<int> outputs_;
};

}  // namespace ember::ops
