#include "engine/models/layers.h"

#include <utility>

namespace ember::engine::models {

using ops::Graph;
using ops::Initializer;
using ops::OpAttrs;

ModelParamSpec BottomMlpParam() {
  return {kBottomMlp, std::vector<int>{512, 256, 64},
          "bottom MLP widths after the dense input; a last layer to --embedding_dim is added "
          "when the last width differs from it ({512, 256, 64} and {512, 256, 64, 16} give the "
          "same network for dim 16).",
          Widths(0)};
}

Result<Inputs> AddInputs(Graph* g, const ModelOptions& o) {
  Inputs in;
  if (o.num_dense > 0) {
    EMBER_ASSIGN_OR_RETURN(in.dense, g->AddInput("dense", {o.num_dense}));
  }
  in.pooled_width = int64_t{o.num_slots} * o.embedding_dim;
  EMBER_ASSIGN_OR_RETURN(in.pooled, g->AddInput("pooled", {in.pooled_width}));
  return in;
}

Result<int> DenseAndEmbeddings(Graph* g, const Inputs& in, int64_t* width) {
  if (in.dense < 0) {
    *width = in.pooled_width;
    return in.pooled;
  }
  *width = g->values()[in.dense].shape[0] + in.pooled_width;
  EMBER_ASSIGN_OR_RETURN(const std::vector<int> x,
                         g->AddNode("x0", "concat", {in.dense, in.pooled}));
  return x[0];
}

Result<int> AddMlp(Graph* g, const std::string& name, int x, int64_t in,
                   const std::vector<int>& widths, bool last_relu) {
  for (size_t l = 0; l < widths.size(); ++l) {
    const std::string layer = name + "." + std::to_string(l);
    const int64_t out = widths[l];
    EMBER_ASSIGN_OR_RETURN(
        const int w, g->AddParameter(layer + ".weight", {out, in}, Initializer::kHeUniform, in));
    EMBER_ASSIGN_OR_RETURN(const int b,
                           g->AddParameter(layer + ".bias", {out}, Initializer::kZeros));
    const bool relu = l + 1 < widths.size() || last_relu;
    EMBER_ASSIGN_OR_RETURN(
        const std::vector<int> y,
        g->AddNode(layer, "fully_connected", {x, w, b}, OpAttrs().Set("activation", relu ? 1 : 0)));
    x = y[0];
    in = out;
  }
  return x;
}

std::vector<int> WithOutput(std::vector<int> hidden, int output) {
  if (hidden.empty() || hidden.back() != output) hidden.push_back(output);
  return hidden;
}

}  // namespace ember::engine::models
