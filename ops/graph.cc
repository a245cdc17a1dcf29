#include "ops/graph.h"

#include <algorithm>
#include <cstdio>

namespace ember::ops {

int64_t GraphValue::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Result<int> Graph::AddValue(GraphValue value) {
  if (value.name.empty()) return Status::InvalidArgument("a graph value needs a name");
  for (const GraphValue& v : values_) {
    if (v.name == value.name) {
      return Status::InvalidArgument("graph value \"", value.name, "\" already exists");
    }
  }
  for (int64_t d : value.shape) {
    if (d < 1) {
      return Status::InvalidArgument("graph value \"", value.name,
                                     "\" has a dimension of size ", d);
    }
  }
  values_.push_back(std::move(value));
  return static_cast<int>(values_.size()) - 1;
}

Result<int> Graph::AddInput(const std::string& name, std::vector<int64_t> per_example_shape) {
  GraphValue value;
  value.name = name;
  value.kind = ValueKind::kInput;
  value.shape = std::move(per_example_shape);
  EMBER_ASSIGN_OR_RETURN(const int id, AddValue(std::move(value)));
  inputs_.push_back(id);
  return id;
}

Result<int> Graph::AddParameter(const std::string& name, std::vector<int64_t> shape,
                                Initializer initializer, int64_t fan_in) {
  if (fan_in < 1) return Status::InvalidArgument("parameter \"", name, "\": fan_in ", fan_in);
  GraphValue value;
  value.name = name;
  value.kind = ValueKind::kParameter;
  value.shape = std::move(shape);
  value.initializer = initializer;
  value.fan_in = fan_in;
  EMBER_ASSIGN_OR_RETURN(const int id, AddValue(std::move(value)));
  parameters_.push_back(id);
  return id;
}

std::vector<InputShape> Graph::InputShapes(const std::vector<int>& inputs) const {
  std::vector<InputShape> shapes;
  for (int id : inputs) shapes.push_back(InputShape{values_[id].shape, values_[id].batched()});
  return shapes;
}

Result<std::vector<int>> Graph::AddNode(const std::string& name, const std::string& op,
                                        const std::vector<int>& inputs, OpAttrs attrs) {
  Result<const OpDef*> def = registry_->FindOp(op);
  if (!def.ok()) return def.status().WithContext("node \"" + name + "\"");
  for (int id : inputs) {
    if (id < 0 || id >= static_cast<int>(values_.size())) {
      return Status::InvalidArgument("node \"", name, "\" reads value ", id,
                                     ", which is not in the graph");
    }
    if (values_[id].saved_for_backward) {
      return Status::InvalidArgument(
          "node \"", name, "\" reads \"", values_[id].name, "\", which node \"",
          nodes_[values_[id].producer].name,
          "\" saves for its own backward; only its first outputs can feed other nodes");
    }
  }
  if ((*def)->num_inputs >= 0 && static_cast<int>(inputs.size()) != (*def)->num_inputs) {
    return Status::InvalidArgument("node \"", name, "\": ", op, " takes ", (*def)->num_inputs,
                                   " inputs, got ", inputs.size());
  }
  if (inputs.empty()) return Status::InvalidArgument("node \"", name, "\" has no inputs");
  Result<std::vector<std::vector<int64_t>>> shapes = (*def)->infer(InputShapes(inputs), attrs);
  if (!shapes.ok()) return shapes.status().WithContext("node \"" + name + "\" (" + op + ")");
  const size_t saved = static_cast<size_t>((*def)->saved_outputs);
  if (saved >= shapes->size()) {
    return Status::InvalidArgument("node \"", name, "\": ", op, " saves ", saved, " of its ",
                                   shapes->size(), " outputs for its backward; at least one ",
                                   "output must not be saved");
  }
  const size_t regular = shapes->size() - saved;
  GraphNode node;
  node.name = name;
  node.op = op;
  node.attrs = std::move(attrs);
  node.inputs = inputs;
  const int node_id = static_cast<int>(nodes_.size());
  for (size_t i = 0; i < shapes->size(); ++i) {
    GraphValue value;
    if (i < regular) {
      value.name = regular == 1 ? name : name + ":" + std::to_string(i);
    } else {
      value.name = name + ":saved" + std::to_string(i - regular);
      value.saved_for_backward = true;
    }
    value.kind = ValueKind::kActivation;
    value.shape = (*shapes)[i];
    value.producer = node_id;
    EMBER_ASSIGN_OR_RETURN(const int id, AddValue(std::move(value)));
    node.outputs.push_back(id);
  }
  nodes_.push_back(std::move(node));
  return nodes_.back().outputs;
}

Status Graph::MarkOutput(int value) {
  if (value < 0 || value >= static_cast<int>(values_.size()) ||
      values_[value].kind != ValueKind::kActivation) {
    return Status::InvalidArgument("graph output ", value, " is not an activation");
  }
  if (values_[value].saved_for_backward) {
    return Status::InvalidArgument("graph output \"", values_[value].name,
                                   "\" is saved by its node for its backward and has no gradient");
  }
  outputs_.push_back(value);
  return Status::OK();
}

Result<int> Graph::FindValue(const std::string& name) const {
  for (size_t i = 0; i < values_.size(); ++i) {
    if (values_[i].name == name) return static_cast<int>(i);
  }
  return Status::NotFound("no graph value \"", name, "\"");
}

OpCost Graph::NodeCost(int node, int64_t batch, bool backward) const {
  const GraphNode& n = nodes_[node];
  Result<const OpDef*> def = registry_->FindOp(n.op);
  if (!def.ok() || !(*def)->cost) return OpCost{};
  return (*def)->cost(InputShapes(n.inputs), n.attrs, batch, backward);
}

OpCost Graph::TotalCost(int64_t batch) const {
  OpCost total;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    for (bool backward : {false, true}) {
      const OpCost c = NodeCost(static_cast<int>(i), batch, backward);
      total.flops += c.flops;
      total.bytes += c.bytes;
    }
  }
  return total;
}

int64_t Graph::parameter_count() const {
  int64_t n = 0;
  for (int id : parameters_) n += values_[id].elements();
  return n;
}

namespace {
std::string ShapeText(const GraphValue& v) {
  std::string text = v.batched() ? "[B" : "[";
  for (size_t i = 0; i < v.shape.size(); ++i) {
    text += (i == 0 && !v.batched() ? "" : ", ") + std::to_string(v.shape[i]);
  }
  return text + "]";
}
}  // namespace

std::string Graph::ToDot() const {
  std::string dot = "digraph model {\n  rankdir=TB;\n";
  for (size_t i = 0; i < values_.size(); ++i) {
    const GraphValue& v = values_[i];
    if (v.kind == ValueKind::kActivation) continue;  // Drawn as the node's edge.
    dot += "  v" + std::to_string(i) + " [shape=ellipse" +
           (v.kind == ValueKind::kParameter ? ", style=filled, fillcolor=lightgrey" : "") +
           ", label=\"" + v.name + "\\n" + ShapeText(v) + "\"];\n";
  }
  for (size_t n = 0; n < nodes_.size(); ++n) {
    dot += "  n" + std::to_string(n) + " [shape=box, label=\"" + nodes_[n].name + "\\n" +
           nodes_[n].op + "\"];\n";
  }
  for (size_t n = 0; n < nodes_.size(); ++n) {
    for (int in : nodes_[n].inputs) {
      const GraphValue& v = values_[in];
      // Appended piece by piece: GCC 12 warns (-Wrestrict, a false
      // positive) on "literal" + a temporary string.
      dot += v.producer >= 0 ? "  n" : "  v";
      dot += std::to_string(v.producer >= 0 ? v.producer : in);
      dot += " -> n";
      dot += std::to_string(n);
      dot += " [label=\"";
      dot += ShapeText(v);
      dot += "\"];\n";
    }
  }
  for (int out : outputs_) {
    dot += "  out" + std::to_string(out) + " [shape=doublecircle, label=\"" +
           values_[out].name + "\"];\n  n" + std::to_string(values_[out].producer) + " -> out" +
           std::to_string(out) + ";\n";
  }
  return dot + "}\n";
}

}  // namespace ember::ops
