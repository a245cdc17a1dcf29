// Wide & Deep (Cheng et al. 2016): a wide linear model over [dense,
// embeddings] + a deep MLP over the same, summed. Cross-product features for
// the wide part are for the data to provide as extra slots.

#include "engine/model_registry.h"
#include "engine/models/layers.h"

namespace ember::engine::models {
namespace {

Status BuildWideDeep(const ModelOptions& o, ops::Graph* g) {
  EMBER_ASSIGN_OR_RETURN(const Inputs in, AddInputs(g, o));
  int64_t width = 0;
  EMBER_ASSIGN_OR_RETURN(const int x, DenseAndEmbeddings(g, in, &width));
  EMBER_ASSIGN_OR_RETURN(const int wide, AddMlp(g, "wide", x, width, {1}, false));
  EMBER_ASSIGN_OR_RETURN(const int deep,
                         AddMlp(g, "deep", x, width, WithOutput(o.top_mlp, 1), false));
  EMBER_ASSIGN_OR_RETURN(const std::vector<int> logit, g->AddNode("logit", "add", {wide, deep}));
  return g->MarkOutput(logit[0]);
}

}  // namespace

ModelSpec WideDeepSpec() {
  ModelSpec spec;
  spec.name = "wide_deep";
  spec.description =
      "Wide & Deep (Cheng et al. 2016): linear model + deep MLP over [dense, embeddings], summed";
  spec.build = &BuildWideDeep;
  return spec;
}

}  // namespace ember::engine::models
