// DCN-v2 (Wang et al. 2021), stacked: cross_layers cross layers (full rank,
// or rank cross_rank) over x0 = [dense, embeddings], then the MLP.

#include "engine/model_registry.h"
#include "engine/models/layers.h"

namespace ember::engine::models {
namespace {

using ops::Initializer;

Status BuildDcnV2(const ModelOptions& o, ops::Graph* g) {
  EMBER_ASSIGN_OR_RETURN(const Inputs in, AddInputs(g, o));
  int64_t d = 0;
  EMBER_ASSIGN_OR_RETURN(const int x0, DenseAndEmbeddings(g, in, &d));
  int xl = x0;
  for (int l = 0; l < o.cross_layers; ++l) {
    const std::string layer = "cross." + std::to_string(l);
    EMBER_ASSIGN_OR_RETURN(const int b, g->AddParameter(layer + ".bias", {d}, Initializer::kZeros));
    std::vector<int> y;
    // Glorot-uniform weights (He uniform with fan_in = fan_in + fan_out).
    if (o.cross_rank > 0) {
      const int64_t r = o.cross_rank;
      EMBER_ASSIGN_OR_RETURN(const int u,
                             g->AddParameter(layer + ".u", {d, r}, Initializer::kHeUniform, d + r));
      EMBER_ASSIGN_OR_RETURN(const int v,
                             g->AddParameter(layer + ".v", {d, r}, Initializer::kHeUniform, d + r));
      EMBER_ASSIGN_OR_RETURN(y, g->AddNode(layer, "cross_layer_low_rank", {x0, xl, u, v, b}));
    } else {
      EMBER_ASSIGN_OR_RETURN(
          const int w, g->AddParameter(layer + ".weight", {d, d}, Initializer::kHeUniform, 2 * d));
      EMBER_ASSIGN_OR_RETURN(y, g->AddNode(layer, "cross_layer", {x0, xl, w, b}));
    }
    xl = y[0];
  }
  EMBER_ASSIGN_OR_RETURN(const int logit,
                         AddMlp(g, "deep", xl, d, WithOutput(o.top_mlp, 1), false));
  return g->MarkOutput(logit);
}

}  // namespace

ModelSpec DcnV2Spec() {
  ModelSpec spec;
  spec.name = "dcn_v2";
  spec.description =
      "DCN-v2 (Wang et al. 2021): cross layers (full or low rank) over [dense, embeddings], then "
      "an MLP";
  spec.build = &BuildDcnV2;
  spec.describe = [](const ModelOptions& o) {
    return " cross=" + std::to_string(o.cross_layers) + " rank=" + std::to_string(o.cross_rank);
  };
  return spec;
}

}  // namespace ember::engine::models
