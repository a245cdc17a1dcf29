#pragma once

// The pieces of graph the models of the zoo share: their inputs, MLPs and the
// concatenation [dense, embeddings]. Parameter names are part of a model's
// checkpoint format: a helper names its values after the `name` it is given.

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/model_options.h"
#include "engine/model_params.h"
#include "ops/graph.h"

namespace ember::engine::models {

// The inputs every model reads: "dense" [num_dense] (absent, -1, without
// dense features) and "pooled" [num_slots * embedding_dim].
struct Inputs {
  int dense = -1;
  int pooled = -1;
  int64_t pooled_width = 0;
};

// Adds "dense" (when options.num_dense > 0) and "pooled" to `graph`, in that
// order.
Result<Inputs> AddInputs(ops::Graph* graph, const ModelOptions& options);

// [dense, pooled] (a concat node "x0"), or pooled alone without dense
// features; its width in `*width`.
Result<int> DenseAndEmbeddings(ops::Graph* graph, const Inputs& inputs, int64_t* width);

// Adds fully connected layers "<name>.<l>" (parameters "<name>.<l>.weight",
// He uniform, and "<name>.<l>.bias", zeros) from `x` (width `in`) through
// `widths`; hidden layers use ReLU, the last one when `last_relu`. Returns
// the last output.
Result<int> AddMlp(ops::Graph* graph, const std::string& name, int x, int64_t in,
                   const std::vector<int>& widths, bool last_relu);

// DLRM's bottom MLP, which dlrm and moe declare alike: "bottom_mlp", the
// widths after the dense input.
constexpr char kBottomMlp[] = "bottom_mlp";
ModelParamSpec BottomMlpParam();

// `hidden` followed by a last width `output`, not repeated when the last
// hidden width already equals it.
std::vector<int> WithOutput(std::vector<int> hidden, int output);

}  // namespace ember::engine::models
