// DCN-v2 (Wang et al. 2021), stacked: cross_layers cross layers (full rank,
// or rank cross_rank) over x0 = [dense, embeddings], then the MLP.

#include "engine/model_registry.h"
#include "engine/models/layers.h"

namespace ember::engine::models {
namespace {

using ops::Initializer;

constexpr char kCrossLayers[] = "cross_layers";
constexpr char kCrossRank[] = "cross_rank";

Status BuildDcnV2(const ModelOptions& o, ops::Graph* g) {
  EMBER_ASSIGN_OR_RETURN(const Inputs in, AddInputs(g, o));
  int64_t d = 0;
  EMBER_ASSIGN_OR_RETURN(const int x0, DenseAndEmbeddings(g, in, &d));
  int xl = x0;
  const int cross_layers = o.params.Int(kCrossLayers);
  const int cross_rank = o.params.Int(kCrossRank);
  for (int l = 0; l < cross_layers; ++l) {
    const std::string layer = "cross." + std::to_string(l);
    EMBER_ASSIGN_OR_RETURN(const int b, g->AddParameter(layer + ".bias", {d}, Initializer::kZeros));
    std::vector<int> y;
    // Glorot-uniform weights (He uniform with fan_in = fan_in + fan_out).
    if (cross_rank > 0) {
      const int64_t r = cross_rank;
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
  spec.params = {
      {kCrossLayers, 3, "cross layers before the MLP.", AtLeast(0)},
      {kCrossRank, 0, "rank of each cross layer's weight (U V^T); 0: full rank.", AtLeast(0)},
  };
  return spec;
}

}  // namespace ember::engine::models
